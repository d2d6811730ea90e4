from daydream.cli import main

raise SystemExit(main())
