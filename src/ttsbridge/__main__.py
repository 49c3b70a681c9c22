from ttsbridge.cli import main

raise SystemExit(main())
