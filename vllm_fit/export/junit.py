"""JUnit XML, one test case per fleet entry (or verified config), for CI systems."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from enum import Enum
from typing import Any, Iterable, Mapping


class Verdict(str, Enum):
    """How a CI system should count a case."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"


_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters XML 1.0 cannot carry at all (escaped or not): control characters, lone surrogates."""


def xml_text(value: Any) -> str:
    """A value as text XML can hold: characters it cannot carry become U+FFFD."""
    return _NOT_XML.sub("\ufffd", str(value))


def junit_xml(suite: str, cases: Iterable[Mapping[str, Any]]) -> str:
    """cases: dicts with name, verdict (a Verdict), status (shown as the failure type), message, time, details."""
    cases = list(cases)
    root = ET.Element("testsuites")
    node = ET.SubElement(root, "testsuite", name=xml_text(suite), tests=str(len(cases)),
                         failures=str(sum(c["verdict"] is Verdict.FAILED for c in cases)),
                         errors=str(sum(c["verdict"] is Verdict.ERROR for c in cases)),
                         time="%.2f" % sum(float(c.get("time") or 0) for c in cases))
    for case in cases:
        element = ET.SubElement(node, "testcase", classname=xml_text(suite), name=xml_text(case["name"]),
                                time="%.2f" % float(case.get("time") or 0))
        message = xml_text(case.get("message") or case["status"])
        details = xml_text(case.get("details") or "")
        if case["verdict"] is Verdict.FAILED:
            ET.SubElement(element, "failure", message=message, type=xml_text(case["status"])).text = details
        elif case["verdict"] is Verdict.ERROR:
            ET.SubElement(element, "error", message=message, type="error").text = details
        if details:
            ET.SubElement(element, "system-out").text = details
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
