"""A validation report as JUnit XML, for CI systems."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from ckpt_cli.api import CODES, SEVERITY_RANK, ValidationReport


def junit_xml(report: ValidationReport) -> str:
    """One test case per rule code that ran, failing with its findings at or above the
    report's ``fail_on``; findings below it are listed in system-out."""
    failing_rank = SEVERITY_RANK[report.fail_on]
    suite = ET.Element(
        "testsuite",
        name="ckpt validate",
        tests=str(len(CODES)),
        time=str(report.stats.get("seconds", 0)),
    )
    failures = 0
    for code in CODES:
        found = [f for f in report.findings if f.code == code]
        case = ET.SubElement(suite, "testcase", classname=report.checkpoint, name=code)
        bad = [f for f in found if SEVERITY_RANK[f.severity] >= failing_rank]
        if bad:
            failures += 1
            failure = ET.SubElement(
                case, "failure", type=code, message=f"{len(bad)} finding(s): {bad[0].message}"
            )
            failure.text = "\n".join(
                f"[{f.severity}] {f.message}" + (f"\n  hint: {f.hint}" if f.hint else "")
                for f in bad
            )
        rest = [f for f in found if f not in bad]
        if rest:
            out = ET.SubElement(case, "system-out")
            out.text = "\n".join(f"[{f.severity}] {f.message}" for f in rest)
    suite.set("failures", str(failures))
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
