"""A call built once by a package's own builder, then patched per call: a template.

Calling a package's builder for every call costs more client CPU than Redis spends
running the script, so a load generator would measure the builder. A template keeps what
the builder gave and patches only the values that change (a job id, a token, a time).

Nothing about the builder's layout is written here. A template is derived from one call
built with *sentinel* values in its slots (None: a slot this shape does not use): an
element equal to a sentinel is a slot; a string or msgpack blob holding one (or its
packing) is cut around it. A second build with other sentinels (other lengths, so a
length header that moves is caught) must equal the template filled with them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from bench.errors import BenchError

# What a builder returns: its KEYS and ARGV.
Built = tuple[list[Any], list[Any]]


_packers = threading.local()  # msgpack.packb makes a Packer a call; one a thread is kept instead


def packed(value: Any) -> bytes:
    """One value as the builders pack it (msgpack, str as str and bytes as bin)."""
    if (packer := getattr(_packers, "packer", None)) is None:
        packer = _packers.packer = msgpack.Packer(use_bin_type=True)
    result: bytes = packer.pack(value)
    return result


@dataclass(frozen=True, slots=True)
class Slot:
    """An element that is a slot's value itself."""

    at: int
    slot: int

    def make(self, values: Sequence[Any]) -> Any:
        return values[self.slot]


@dataclass(frozen=True, slots=True)
class Text:
    """A string with one slot's value inside it: ``head + value + tail``."""

    at: int
    head: str
    slot: int
    tail: str

    def make(self, values: Sequence[Any]) -> Any:
        return self.head + values[self.slot] + self.tail


@dataclass(frozen=True, slots=True)
class Packed:
    """A msgpack blob with slots' packed values inside: ``head``, then each slot's packed value
    and the piece that follows it."""

    at: int
    head: bytes
    rest: tuple[tuple[int, bytes], ...]  # (slot, the piece after its value)

    def make(self, values: Sequence[Any]) -> Any:
        out = self.head
        for slot, piece in self.rest:
            out += packed(values[slot]) + piece
        return out


Patch = Slot | Text | Packed


@dataclass(frozen=True)
class CallTemplate:
    """One call shape: its constant KEYS and ARGV, and the patches that fill the slots."""

    keys: tuple[Any, ...]
    args: tuple[Any, ...]
    key_patches: tuple[Patch, ...]
    arg_patches: tuple[Patch, ...]

    def arg_of(self, slot: int) -> int:
        """The ARGV index that is ``slot``'s value itself."""
        for patch in self.arg_patches:
            if isinstance(patch, Slot) and patch.slot == slot:
                return patch.at
        raise BenchError(f"no ARGV element of the template is slot {slot}")

    def __post_init__(self) -> None:
        # (index, make) pairs, bound once: fill runs once a call
        object.__setattr__(self, "_key_makes", tuple((p.at, p.make) for p in self.key_patches))
        object.__setattr__(self, "_arg_makes", tuple((p.at, p.make) for p in self.arg_patches))

    def fill(self, values: Sequence[Any]) -> Built:
        """The call with ``values`` in its slots: new lists, the constants shared."""
        keys = list(self.keys)
        for at, make in self._key_makes:  # type: ignore[attr-defined]
            keys[at] = make(values)
        args = list(self.args)
        for at, make in self._arg_makes:  # type: ignore[attr-defined]
            args[at] = make(values)
        return keys, args


def _cut_blob(at: int, blob: bytes, sentinels: Sequence[Any]) -> Packed | None:
    """``blob`` cut at each sentinel's packing found in it (exactly once each); None: none found."""
    found: list[tuple[int, int, bytes]] = []
    for slot, sentinel in enumerate(sentinels):
        if sentinel is None:
            continue
        mark = packed(sentinel)
        count = blob.count(mark)
        if count > 1:
            raise BenchError(f"a template's sentinel {sentinel!r} is packed {count} times in one blob")
        if count:
            found.append((blob.index(mark), slot, mark))
    if not found:
        return None
    found.sort()
    pieces, start = [], 0
    for offset, _, mark in found:
        pieces.append(blob[start:offset])
        start = offset + len(mark)
    pieces.append(blob[start:])
    return Packed(at, pieces[0], tuple(zip((slot for _, slot, _ in found), pieces[1:], strict=True)))


def _patch(at: int, element: Any, sentinels: Sequence[Any]) -> Patch | None:
    """How the element at ``at`` depends on the slots; None: it is a constant."""
    for slot, sentinel in enumerate(sentinels):
        if sentinel is not None and type(element) is type(sentinel) and element == sentinel:
            return Slot(at, slot)
    if isinstance(element, str):
        inside = [(slot, s) for slot, s in enumerate(sentinels) if isinstance(s, str) and s in element]
        if len(inside) > 1 or (inside and element.count(inside[0][1]) > 1):
            raise BenchError(f"a template's string {element!r} holds more than one slot")
        if inside:
            slot, sentinel = inside[0]
            head, _, tail = element.partition(sentinel)
            return Text(at, head, slot, tail)
    if isinstance(element, bytes):
        return _cut_blob(at, element, sentinels)
    return None


def _patches(elements: Sequence[Any], sentinels: Sequence[Any], fixed: dict[int, int]) -> tuple[Patch, ...]:
    found = (_patch(at, element, sentinels) for at, element in enumerate(elements) if at not in fixed)
    return (*(Slot(at, slot) for at, slot in fixed.items()), *(patch for patch in found if patch is not None))


def same_call(a: Built, b: Built) -> bool:
    """Two calls alike element by element, types too (1 and "1" go out alike, but a template
    that turns one into the other is not the builder's)."""
    return all(
        len(x) == len(y) and all(type(p) is type(q) and p == q for p, q in zip(x, y, strict=True))
        for x, y in zip(a, b, strict=True)
    )


def derive(
    build: Callable[[Sequence[Any]], Built],
    first: Sequence[Any],
    second: Sequence[Any],
    *,
    fixed_args: dict[int, int] | None = None,
    what: str = "a call",
) -> CallTemplate:
    """The template of ``build``'s calls: derived from its call with the sentinels ``first`` in
    the slots, checked against its call with ``second``. ``fixed_args`` maps an ARGV index to a
    slot the builder fills on its own (a clock it reads): the value of that slot is taken from
    each build's own element, never searched for."""
    fixed = fixed_args or {}
    keys, args = build(first)
    template = CallTemplate(tuple(keys), tuple(args), _patches(keys, first, {}), _patches(args, first, fixed))
    check_keys, check_args = build(second)
    values = list(second)
    for at, slot in fixed.items():
        values[slot] = check_args[at]
    if not same_call(template.fill(values), (check_keys, check_args)):
        raise BenchError(f"{what} does not fit a template: a second build differs beyond its slots")
    return template
