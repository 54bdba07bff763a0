"""Stubs generated from host/proto by gen_stubs.sh: do not edit."""
