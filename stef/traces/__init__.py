"""Agent logs from traces: OpenInference / OpenTelemetry spans mapped to log records
(:mod:`stef.traces.spans`), OTLP JSON trace files read and evaluation events built
(:mod:`stef.traces.otlp`). Pure: the servers are reached from :mod:`tasks.traces`."""
