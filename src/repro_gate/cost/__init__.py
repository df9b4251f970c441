"""The cost of determinism: the cost run's design (`plan.py`: the arm of every step) and its
estimate from the run's blocks (`estimate.py`: t-interval over block pairs, status, budget, and
`narrow_enough`, the early stop's rule the probe keeps a copy of).

It sits below gate/ (which plans and records the cost run) and imports only config.
"""
