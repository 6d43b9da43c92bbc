"""JUnit XML, one test case per fleet entry (or verified config), for CI systems."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from enum import Enum
from typing import Any, Iterable, Mapping


class Verdict(str, Enum):
    """How a CI system should count a case."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"


def junit_xml(suite: str, cases: Iterable[Mapping[str, Any]]) -> str:
    """cases: dicts with name, verdict (a Verdict), status (shown as the failure type), message, time, details."""
    cases = list(cases)
    root = ET.Element("testsuites")
    node = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)),
                         failures=str(sum(c["verdict"] is Verdict.FAILED for c in cases)),
                         errors=str(sum(c["verdict"] is Verdict.ERROR for c in cases)),
                         time="%.2f" % sum(float(c.get("time") or 0) for c in cases))
    for case in cases:
        element = ET.SubElement(node, "testcase", classname=suite, name=str(case["name"]),
                                time="%.2f" % float(case.get("time") or 0))
        message = str(case.get("message") or case["status"])
        if case["verdict"] is Verdict.FAILED:
            ET.SubElement(element, "failure", message=message, type=str(case["status"])).text = case.get("details", "")
        elif case["verdict"] is Verdict.ERROR:
            ET.SubElement(element, "error", message=message, type="error").text = case.get("details", "")
        if case.get("details"):
            ET.SubElement(element, "system-out").text = case["details"]
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
