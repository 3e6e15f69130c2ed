"""The end-to-end load benchmark (issue 8): simulated browsers, one Daphne, the emulator.

`python -m benchmarks load` (see `cli` and benchmarks/README.md). The orchestrator (`cli`,
`runner`) starts every process itself (`stack`), drives the simulated-browser process
(`browser_process`, which scripts the page with `browser` and `page`), samples the server
(`sampler`; `instrumented_app`, `dbcount` and `memory` run inside Daphne, `emulator_app` wraps
the emulator) and turns what it gathered into figures (`metrics`, `report`).
"""
