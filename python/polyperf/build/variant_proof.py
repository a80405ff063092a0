"""Proof from the binaries themselves (not the variant names) that build variants differ: debug info,
stripping, unwinding tables, symbols renamed by ThinLTO, the mimalloc allocator linked in, and the instruction
sets the code uses.

Reads the ELF section table directly; instruction counts come from binutils' `objdump -d`. Used by the
build-settings suite to show that each rung of its ladder carries its setting (fat LTO, one codegen unit,
panic=abort, strip), that `native` really was compiled for this CPU and `native-mimalloc` really carries
mimalloc, even in stripped binaries (`ladder_failures`).
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "InstructionCounts",
    "VariantFacts",
    "count_instructions",
    "cpu_has_avx2_bmi2",
    "elf_sections",
    "has_debug_info",
    "instruction_counts",
    "is_debug_build",
    "is_stripped",
    "ladder_failures",
    "links_mimalloc",
    "promoted_symbols",
    "uses_target_cpu_native",
    "variant_facts",
]

# Left in the binary by mimalloc's C sources (its message prefix, and the prefix its environment options
# are built from at run time), so they survive `strip`; a build without the `mimalloc` feature has neither.
_MIMALLOC_MARKERS = (b"mimalloc: ", b"mimalloc_")
# Overflow checks are on only in the dev profile: its own code then calls these core panics.
_OVERFLOW_MESSAGE = b"attempt to add with overflow"
# Plain x86-64 (what rustc targets by default) has no VEX/EVEX encodings and no BMI2; only
# `-C target-cpu=native` (or runtime-dispatched SIMD in a few crates) emits them.
_BMI2 = frozenset({"shlx", "shrx", "sarx", "rorx", "mulx", "pdep", "pext", "bzhi"})
_INSTRUCTION = re.compile(r"^\s*[0-9a-f]+:\s+([a-z][a-z0-9.]*)\s*(.*)$")
# ThinLTO (what rustc runs between the codegen units of a crate unless lto = "fat" or codegen-units = 1)
# promotes a local function that another unit calls to a global one renamed `<name>.llvm.<hash>`.
# Measured here: panic=abort leaves 3-6% of release's `.gcc_except_table`, fat LTO alone 50%, one codegen unit 73%.
_ABORT_SHARE = 4
_PROMOTED = re.compile(rb"\.llvm\.[0-9]+\x00")


def elf_sections(binary: Path) -> dict[str, int]:
    """Section name -> size in bytes, read from a little-endian ELF64 file's section header table."""
    data = Path(binary).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{binary}: not a little-endian ELF64 file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_offset = headers[shstrndx][4]
    sections = {}
    for name_at, _type, _flags, _addr, _offset, size, *_rest in headers:
        start = names_offset + name_at
        sections[data[start : data.index(b"\0", start)].decode()] = size
    return sections


def is_stripped(binary: Path) -> bool:
    """No symbol table (`strip = true` in the profile)."""
    return ".symtab" not in elf_sections(binary)


def has_debug_info(binary: Path) -> bool:
    return ".debug_info" in elf_sections(binary)


def links_mimalloc(binary: Path) -> bool:
    """mimalloc is compiled into the binary: its strings, or its `mi_malloc` symbol when not stripped."""
    data = Path(binary).read_bytes()
    return all(marker in data for marker in _MIMALLOC_MARKERS) or b"\0mi_malloc\0" in data


def promoted_symbols(binary: Path) -> int:
    """Symbols ThinLTO renamed (`.llvm.<hash>`) in the symbol table: none after fat LTO, few with one codegen
    unit (only the standard library's own), 0 in a stripped binary."""
    return len(_PROMOTED.findall(Path(binary).read_bytes()))


def is_debug_build(binary: Path) -> bool:
    """The dev profile: DWARF debug info plus the overflow-check panics only debug code calls."""
    return has_debug_info(binary) and _OVERFLOW_MESSAGE in Path(binary).read_bytes()


@dataclass(frozen=True)
class InstructionCounts:
    """Instructions in the binary's code by kind (static counts from the disassembly, not executed)."""

    total: int
    vex: int  # VEX/EVEX-encoded (mnemonic `v...`): AVX and later
    ymm: int  # using a 256-bit register (AVX/AVX2)
    zmm: int  # using a 512-bit register (AVX-512)
    bmi2: int  # shlx, sarx, mulx, ...

    @property
    def vex_share(self) -> float:
        return self.vex / self.total if self.total else 0.0


def count_instructions(disassembly: str) -> InstructionCounts:
    """Counts instruction kinds in `objdump -d --no-show-raw-insn` text (pure)."""
    kinds: Counter[str] = Counter()
    for line in disassembly.splitlines():
        match = _INSTRUCTION.match(line)
        if match is None:
            continue
        mnemonic, operands = match.groups()
        kinds["total"] += 1
        kinds["vex"] += mnemonic.startswith("v")
        kinds["ymm"] += "%ymm" in operands
        kinds["zmm"] += "%zmm" in operands
        kinds["bmi2"] += mnemonic in _BMI2
    return InstructionCounts(**{k: kinds[k] for k in ("total", "vex", "ymm", "zmm", "bmi2")})


def instruction_counts(binary: Path) -> InstructionCounts:
    """`count_instructions` over `objdump -d` of the binary's code sections (binutils must be installed)."""
    objdump = shutil.which("objdump")
    if objdump is None:
        raise FileNotFoundError("`objdump` not found on PATH: apt-get install binutils")
    done = subprocess.run(
        [objdump, "-d", "--no-show-raw-insn", str(binary)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"objdump -d {binary} failed: {done.stderr.strip()[-300:]}")
    return count_instructions(done.stdout)


def uses_target_cpu_native(binary: Path, baseline: Path, *, factor: float = 3.0) -> bool:
    """True if `binary` uses VEX (AVX+) instructions at least `factor` times as often as `baseline`
    (the same app built for generic x86-64), and BMI2 more often. Needs a CPU with AVX2 and BMI2;
    a few crates dispatch to AVX2 at run time, so the generic build is not at zero."""
    native, generic = instruction_counts(binary), instruction_counts(baseline)
    return native.vex_share >= factor * max(generic.vex_share, 1e-6) and native.bmi2 > generic.bmi2


@dataclass(frozen=True)
class VariantFacts:
    """What one binary shows about how it was built."""

    binary: Path
    size_bytes: int
    stripped: bool
    debug_info: bool
    debug_build: bool
    unwind_tables: bool  # `.gcc_except_table`: landing pads for panic=unwind
    except_table_bytes: int
    promoted_symbols: int
    mimalloc: bool
    instructions: InstructionCounts | None  # None unless asked for (objdump of a debug build takes seconds)


def variant_facts(binary: Path, *, instructions: bool = True) -> VariantFacts:
    sections = elf_sections(binary)
    return VariantFacts(
        binary=Path(binary),
        size_bytes=Path(binary).stat().st_size,
        stripped=".symtab" not in sections,
        debug_info=".debug_info" in sections,
        debug_build=is_debug_build(binary),
        unwind_tables=sections.get(".gcc_except_table", 0) > 0,
        except_table_bytes=sections.get(".gcc_except_table", 0),
        promoted_symbols=promoted_symbols(binary),
        mimalloc=links_mimalloc(binary),
        instructions=instruction_counts(binary) if instructions else None,
    )


def cpu_has_avx2_bmi2(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """This CPU has AVX2 and BMI2 (False where /proc/cpuinfo cannot be read): only then does target-cpu=native
    show as AVX/BMI2 code."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return {"avx2", "bmi2"} <= set(flags)


def ladder_failures(facts: dict[str, VariantFacts], *, native_cpu: bool = True) -> list[str]:
    """What the build-settings ladder's binaries fail to show of their settings, one sentence each (pure; empty
    when every variant carries what its name says). Rules whose variants are absent are not checked;
    `native_cpu`: this CPU has AVX2 and BMI2, so target-cpu=native shows in the code."""
    rules: list[tuple[tuple[str, ...], str, Callable[..., bool]]] = [
        (("dev", "release"), "only dev is a debug build", lambda d, r: d.debug_build and not r.debug_build),
        (("release",), "release is not stripped", lambda r: not r.stripped),
        (
            ("release", "release-fat-lto"),
            "fat LTO leaves no ThinLTO-renamed symbols (release has some)",
            lambda r, f: r.promoted_symbols > 0 and f.promoted_symbols == 0 and not f.stripped,
        ),
        (
            ("release", "release-cgu1"),
            "codegen-units=1 leaves fewer ThinLTO-renamed symbols than release",
            lambda r, c: 0 < c.promoted_symbols < r.promoted_symbols or (c.promoted_symbols == 0 < r.promoted_symbols),
        ),
        (
            ("release", "release-abort"),
            "panic=abort leaves under a quarter of release's exception tables (only the standard library's)",
            lambda r, a: a.except_table_bytes * _ABORT_SHARE < r.except_table_bytes,
        ),
        (
            ("release", "release-fat-lto", "release-cgu1"),
            "fat LTO and codegen-units=1 keep unwinding (over a quarter of release's exception tables)",
            lambda r, *rungs: all(x.except_table_bytes * _ABORT_SHARE > r.except_table_bytes for x in rungs),
        ),
        (
            ("release", "release-lto"),
            "the article's profile is stripped and aborts on panic",
            lambda r, lto: lto.stripped and lto.except_table_bytes * _ABORT_SHARE < r.except_table_bytes,
        ),
        (("release-lto", "native"), "native is stripped like the article's profile", lambda lto, n: n.stripped),
    ]
    if native_cpu:
        rules.append(
            (
                ("release-lto", "native"),
                "native uses AVX (VEX) instructions at least 3x as often as generic",
                lambda lto, n: (
                    lto.instructions is not None
                    and n.instructions is not None
                    and n.instructions.vex_share >= 3 * max(lto.instructions.vex_share, 1e-6)
                ),
            )
        )
    failures = [
        why for names, why, holds in rules if all(v in facts for v in names) and not holds(*(facts[v] for v in names))
    ]
    linked = sorted(v for v, f in facts.items() if f.mimalloc)
    if "native-mimalloc" in facts and linked != ["native-mimalloc"]:
        failures.append(f"only native-mimalloc links mimalloc (found in: {', '.join(linked) or 'none'})")
    return failures
