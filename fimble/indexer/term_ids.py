"""How a term becomes an id: the hash that ``lexical.term_hash`` (plain Python, for query terms) and
``terms`` (numpy, for every word of a file) both compute, and the block field beside it.

A term's id is a 64-bit hash whose low 16 bits are zero (48 bits of hash), so ``id | block`` is one
sortable integer: postings sort by term, then by block. The hash starts from the length times ``C0``
and takes the term eight bytes at a time (little-endian, zero-padded), each time xor, times ``C1``,
xor-shift; then it mixes with ``C2`` (the constants are splitmix64's). The ids are on disk: changing
any value here changes every stored posting.

This module is a leaf so that both computations share it without importing each other.
"""

from __future__ import annotations

__all__ = ["BLOCK_MASK", "C0", "C1", "C2", "ID_MASK", "MASK64", "MAX_BLOCKS"]

MASK64 = (1 << 64) - 1  # Python integers do not wrap: each product is cut to 64 bits
C0 = 0x9E3779B97F4A7C15
C1 = 0xBF58476D1CE4E5B9
C2 = 0x94D049BB133111EB
BLOCK_MASK = 0xFFFF  # the low 16 bits of a posting key: the block number
ID_MASK = MASK64 & ~BLOCK_MASK  # the bits of a term id
MAX_BLOCKS = 60000  # blocks per file: a block number must fit in BLOCK_MASK
