from repro_gate.cli import main

raise SystemExit(main())
