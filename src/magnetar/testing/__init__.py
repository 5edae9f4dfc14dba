"""The shipped test kit: clocks, simulated network/disk, fault injection, conformance suites,
in-process cluster builders and fixtures.  Production code never imports it."""
