"""`python -m benchmarks [reader]`: the stream reader against its peers (`benchmarks.reader`).

`python -m benchmarks load [options]` runs the end-to-end load benchmark instead (`benchmarks.load`,
see benchmarks/README.md), and `python -m benchmarks admin [options]` the cost admin pages over
100,000 generations (`benchmarks.admin_costs`), and `python -m benchmarks markdown` what live
markdown costs on a 4,000-token answer (`benchmarks.live_markdown`), and `python -m benchmarks
markdown-login` an anonymous page's latency while answers render (`benchmarks.markdown_login`),
and `python -m benchmarks knowledge` knowledge collections' ingestion and retrieval
(`benchmarks.knowledge`);
with no sub-command the reader benchmark runs.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["load"]:
        from benchmarks.load.cli import main as load_main

        sys.exit(load_main(sys.argv[2:]))
    if sys.argv[1:2] == ["markdown-login"]:
        from benchmarks.markdown_login import main as markdown_login_main

        sys.exit(markdown_login_main(sys.argv[2:]))
    if sys.argv[1:2] == ["markdown"]:
        from benchmarks.live_markdown import main as markdown_main

        sys.exit(markdown_main(sys.argv[2:]))
    if sys.argv[1:2] == ["costs"]:
        from benchmarks.costs import main as costs_main

        sys.exit(costs_main(sys.argv[2:]))
    if sys.argv[1:2] == ["knowledge"]:
        from benchmarks.knowledge import main as knowledge_main

        sys.exit(knowledge_main(sys.argv[2:]))
    if sys.argv[1:2] == ["admin"]:
        from benchmarks.admin_costs import main as admin_main

        sys.exit(admin_main(sys.argv[2:]))
    from benchmarks.reader import main

    sys.exit(main(sys.argv[2:] if sys.argv[1:2] == ["reader"] else sys.argv[1:]))
