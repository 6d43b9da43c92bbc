"""JUnit XML, one test case per fleet entry (or verified config), for CI systems."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any, Iterable, Mapping

FAILED = {"no_fit", "regressed", "failed"}


def junit_xml(suite: str, cases: Iterable[Mapping[str, Any]]) -> str:
    """cases: dicts with name, status (fit/ok, no_fit/regressed/failed, error), message, time, details."""
    cases = list(cases)
    root = ET.Element("testsuites")
    node = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)),
                         failures=str(sum(c["status"] in FAILED for c in cases)),
                         errors=str(sum(c["status"] == "error" for c in cases)),
                         time="%.2f" % sum(float(c.get("time") or 0) for c in cases))
    for case in cases:
        element = ET.SubElement(node, "testcase", classname=suite, name=str(case["name"]),
                                time="%.2f" % float(case.get("time") or 0))
        message = str(case.get("message") or case["status"])
        if case["status"] in FAILED:
            ET.SubElement(element, "failure", message=message, type=case["status"]).text = case.get("details", "")
        elif case["status"] == "error":
            ET.SubElement(element, "error", message=message, type="error").text = case.get("details", "")
        if case.get("details"):
            ET.SubElement(element, "system-out").text = case["details"]
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
