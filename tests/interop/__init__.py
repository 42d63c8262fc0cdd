"""Interop tests that drive the official RocketMQ C++ client; the harness is ``cpp_client``."""
