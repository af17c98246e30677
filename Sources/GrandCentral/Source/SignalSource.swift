// Signal sources: not written yet (issue 8). Until then they never fire.

final class SignalMonitor: SourceMonitor, @unchecked Sendable {}
