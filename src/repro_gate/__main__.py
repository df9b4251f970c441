from repro_gate.cli.main import main

raise SystemExit(main())
