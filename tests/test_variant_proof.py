"""The actix_matrix build variants differ in the binaries, not just in their names: debug info and overflow
checks (dev), symbols and unwind tables (release), no ThinLTO-renamed symbols (fat LTO), fewer of them (one
codegen unit), fewer landing pads (panic=abort), stripping (release-lto), AVX/BMI2 code (native) and mimalloc
(native-mimalloc). The variant tests read binaries already built (`polyperf build actix_matrix:VARIANT`) and
skip those that are not; the fact readers and the ladder's rules are also checked on known inputs.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path

import pytest

from polyperf.build import APPS
from polyperf.build import variant_proof as vp
from polyperf.build.registry import MATRIX_LADDER

APP = APPS["actix_matrix"]
VARIANTS = MATRIX_LADDER
NEEDS_OBJDUMP = pytest.mark.skipif(shutil.which("objdump") is None, reason="binutils' objdump not installed")


# target-cpu=native only shows as AVX/BMI2 code on a CPU that has them
NEEDS_AVX2_BMI2 = pytest.mark.skipif(not vp.cpu_has_avx2_bmi2(), reason="this CPU lacks AVX2 or BMI2")
STRIPPED = ("release-lto", "native", "native-mimalloc")
ABORTS = ("release-abort", *STRIPPED)

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
def test_the_article_profiles_strip_and_the_abort_profiles_lose_landing_pads(variant: str) -> None:
    facts = vp.elf_sections(_built(variant))
    assert vp.is_stripped(_built(variant)) == (variant in STRIPPED)
    # panic=abort: no landing pads in our code or its dependencies, only the standard library's remain
    under_a_quarter = 4 * facts[".gcc_except_table"] < vp.elf_sections(_built("release"))[".gcc_except_table"]
    assert under_a_quarter == (variant in ABORTS)


def test_the_whole_ladder_carries_its_settings() -> None:
    facts = {v: vp.variant_facts(_built(v), instructions=False) for v in VARIANTS}
    assert vp.ladder_failures(facts, native_cpu=False) == []


def _facts(**changes: object) -> vp.VariantFacts:
    base = vp.VariantFacts(
        binary=Path("x"),
        size_bytes=1,
        stripped=False,
        debug_info=False,
        debug_build=False,
        unwind_tables=True,
        except_table_bytes=1000,
        promoted_symbols=100,
        mimalloc=False,
        instructions=vp.InstructionCounts(total=100, vex=0, ymm=0, zmm=0, bmi2=0),
    )
    return dataclasses.replace(base, **changes)


def _ladder() -> dict[str, vp.VariantFacts]:
    """What each rung shows when it carries its settings."""
    native_code = vp.InstructionCounts(total=100, vex=20, ymm=5, zmm=0, bmi2=3)
    stripped = {"stripped": True, "except_table_bytes": 30, "promoted_symbols": 0}
    return {
        "dev": _facts(debug_info=True, debug_build=True),
        "release": _facts(),
        "release-fat-lto": _facts(promoted_symbols=0, except_table_bytes=500),
        "release-cgu1": _facts(promoted_symbols=7),
        "release-abort": _facts(except_table_bytes=60),
        "release-lto": _facts(**stripped),
        "native": _facts(**stripped, instructions=native_code),
        "native-mimalloc": _facts(**stripped, instructions=native_code, mimalloc=True),
    }


def test_ladder_rules_pass_a_ladder_that_carries_its_settings() -> None:
    assert vp.ladder_failures(_ladder()) == []
    assert vp.ladder_failures({}) == []  # nothing to check


@pytest.mark.parametrize(
    ("variant", "changes", "failure"),
    [
        ("dev", {"debug_build": False}, "only dev is a debug build"),
        ("release-fat-lto", {"promoted_symbols": 12}, "fat LTO"),
        ("release-cgu1", {"promoted_symbols": 100}, "codegen-units=1"),
        ("release-abort", {"except_table_bytes": 300}, "panic=abort"),
        ("release-cgu1", {"except_table_bytes": 100}, "keep unwinding"),
        ("release-lto", {"stripped": False}, "the article's profile"),
        ("native", {"instructions": vp.InstructionCounts(total=100, vex=0, ymm=0, zmm=0, bmi2=0)}, "AVX"),
        ("release", {"mimalloc": True}, "only native-mimalloc links mimalloc (found in: native-mimalloc, release)"),
    ],
)
def test_ladder_rules_name_the_setting_a_binary_lacks(variant: str, changes: dict, failure: str) -> None:
    ladder = _ladder()
    ladder[variant] = dataclasses.replace(ladder[variant], **changes)
    failures = vp.ladder_failures(ladder)
    assert len(failures) == 1 and failure in failures[0], failures


def test_promoted_symbols_counts_thinlto_renames(tmp_path: Path) -> None:
    binary = tmp_path / "strtab"
    binary.write_bytes(b"\0_ZN4core3fmt5write17h0123.llvm.123456789\0main\0f.llvm.42\0not.llvm.x\0")
    assert vp.promoted_symbols(binary) == 2


@pytest.mark.slow
@NEEDS_OBJDUMP
@NEEDS_AVX2_BMI2
@pytest.mark.parametrize("variant", VARIANTS)
def test_only_the_native_variants_are_compiled_for_this_cpu(variant: str) -> None:
    baseline = _built("release")
    assert vp.uses_target_cpu_native(_built(variant), baseline) == variant.startswith("native")
