"""The actix_matrix build variants differ in the binaries, not just in their names: debug info and overflow
checks (dev), symbols and unwind tables (release), stripping (release-lto), AVX/BMI2 code (native) and
mimalloc (native-mimalloc). The variant tests read binaries already built (`polyperf build
actix_matrix:VARIANT`) and skip those that are not; the fact readers are also checked on known inputs.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from polyperf.build import APPS
from polyperf.build import variant_proof as vp

APP = APPS["actix_matrix"]
VARIANTS = tuple(APP.variants)
NEEDS_OBJDUMP = pytest.mark.skipif(shutil.which("objdump") is None, reason="binutils' objdump not installed")


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return set(next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), []))


# target-cpu=native only shows as AVX/BMI2 code on a CPU that has them
NEEDS_AVX2_BMI2 = pytest.mark.skipif(not {"avx2", "bmi2"} <= _cpu_flags(), reason="this CPU lacks AVX2 or BMI2")

DISASSEMBLY = """
0000000000401000 <f>:
  401000:\tpush   %rbp
  401001:\tvmovdqu (%rdi),%ymm0
  401005:\tvpaddq %zmm1,%zmm2,%zmm3
  40100b:\tshlx   %rax,%rbx,%rcx
  401010:\tvzeroupper
  401013:\tret
"""


def test_count_instructions_on_known_disassembly() -> None:
    counts = vp.count_instructions(DISASSEMBLY)
    assert counts == vp.InstructionCounts(total=6, vex=3, ymm=1, zmm=1, bmi2=1)
    assert counts.vex_share == pytest.approx(0.5)


def test_elf_sections_of_the_python_interpreter() -> None:
    sections = vp.elf_sections(Path(sys.executable).resolve())
    assert ".text" in sections and sections[".text"] > 0
    assert not vp.links_mimalloc(Path(sys.executable).resolve())


def test_elf_sections_rejects_a_non_elf_file(tmp_path: Path) -> None:
    text = tmp_path / "x.txt"
    text.write_bytes(b"not an ELF file at all" * 4)
    with pytest.raises(ValueError, match="not a little-endian ELF64"):
        vp.elf_sections(text)


def _built(variant: str) -> Path:
    binary = APP.binary(variant)
    if not binary.exists():
        pytest.skip(f"actix_matrix:{variant} not built ({binary}); run `polyperf build actix_matrix:{variant}`")
    return binary


@pytest.mark.parametrize("variant", VARIANTS)
def test_only_the_mimalloc_variant_links_mimalloc(variant: str) -> None:
    assert vp.links_mimalloc(_built(variant)) == (variant == "native-mimalloc")


@pytest.mark.parametrize("variant", VARIANTS)
def test_only_dev_is_a_debug_build(variant: str) -> None:
    binary = _built(variant)
    assert vp.is_debug_build(binary) == (variant == "dev")
    assert vp.has_debug_info(binary) == (variant == "dev")


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_lto_profiles_strip_and_abort(variant: str) -> None:
    facts = vp.elf_sections(_built(variant))
    lto = variant in ("release-lto", "native", "native-mimalloc")
    assert vp.is_stripped(_built(variant)) == lto
    # panic=abort: no landing pads in our code, so the exception tables shrink
    assert facts[".gcc_except_table"] < vp.elf_sections(_built("release"))[".gcc_except_table"] or not lto


@pytest.mark.slow
@NEEDS_OBJDUMP
@NEEDS_AVX2_BMI2
@pytest.mark.parametrize("variant", VARIANTS)
def test_only_the_native_variants_are_compiled_for_this_cpu(variant: str) -> None:
    baseline = _built("release-lto")
    assert vp.uses_target_cpu_native(_built(variant), baseline) == variant.startswith("native")
