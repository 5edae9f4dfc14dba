"""Shared pytest configuration.  Fixtures live in magnetar.testing so other projects can use them."""
