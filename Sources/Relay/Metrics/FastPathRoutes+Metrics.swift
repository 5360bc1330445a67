import FastPath

extension FastPathRoutes {
    /// Adds this loop's fast path figures to its metrics snapshot; loop 0 also adds the
    /// program's machine-wide ones.
    func contribute(to metrics: inout LoopMetrics, isFirstLoop: Bool) {
        metrics.kernelRelayed = relayed
        metrics.kernelRoutes = UInt64(count)
        guard isFirstLoop else { return }
        metrics.offloadEnabled = 1
        let figures = programFigures()
        metrics.offloadFallback = figures.fallback
        metrics.offloadXDP = figures.xdp
    }
}
