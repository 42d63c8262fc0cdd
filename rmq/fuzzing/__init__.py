"""Fuzzing rmq with its own schemas; sans-IO, outside the protocol package it exercises.

`cases`: hostile requests for `rmq fuzz` (rmq/tools/fuzz.py), each rebuilt from a seed and a
case number. `targets`: the protocol's decoders as functions of arbitrary bytes, for
bench/fuzz_decoders.py and tests/protocol/test_decoder_fuzz.py.
"""
