"""What `rulesched test` prints, and its JUnit XML (one testsuite per RuleTest, one testcase per case).

Failing cases show each differing field, then what the rules actually decided; passing cases are
listed only with `--verbose`. Exit status: 0 all passed, 1 some case failed, 2 some test could not
run (a file that does not load, a missing fixture, rules that fail to load) or no test was found.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from rulesched.tools.ruletest.load import Problem
from rulesched.tools.ruletest.run import CaseResult, SuiteResult

EXIT_PASSED, EXIT_FAILED, EXIT_ERROR = 0, 1, 2


def _case_lines(suite: SuiteResult, case: CaseResult) -> list[str]:
    head = f"{case.status.upper()} {case.location}: {suite.name}: {case.name}"
    if case.error:
        return [head, f"  {case.error}"]
    lines = [head, *(f"  {line}" for line in case.failures)]
    if case.actual:
        lines += ["  actual decision:", *(f"    {line}" for line in case.actual)]
    return lines


def case_text(case: CaseResult) -> str:
    """The failure or error text of one case, as JUnit carries it."""
    if case.error:
        return case.error
    return "\n".join([*case.failures, "actual decision:", *(f"  {line}" for line in case.actual)])


def print_results(
    suites: Sequence[SuiteResult], problems: Sequence[Problem], out: TextIO, err: TextIO, verbose: bool = False
) -> int:
    """Print every failure and error, then a summary; return the exit status."""
    for problem in problems:
        print(f"ERROR {problem}", file=err)
    for suite in suites:
        if suite.error:
            print(f"ERROR {suite.error}", file=err)
        for case in suite.cases:
            if case.status != "passed":
                print("\n".join(_case_lines(suite, case)), file=out)
            elif verbose:
                print(f"PASSED {case.location}: {suite.name}: {case.name} [{suite.engine}]", file=out)
    return _summary(suites, problems, out)


def _summary(suites: Sequence[SuiteResult], problems: Sequence[Problem], out: TextIO) -> int:
    passed = sum(s.count("passed") for s in suites)
    failed = sum(s.count("failed") for s in suites)
    errors = len(problems) + sum(s.count("error") + (1 if s.error else 0) for s in suites)
    print(f"{passed} passed, {failed} failed, {errors} error(s) in {len(suites)} RuleTest(s)", file=out)
    if not suites and not problems:
        print("no RuleTest found", file=out)
        return EXIT_ERROR
    if errors:
        return EXIT_ERROR
    return EXIT_FAILED if failed else EXIT_PASSED


def _testcase(parent: ET.Element, suite: SuiteResult, case: CaseResult) -> None:
    element = ET.SubElement(
        parent,
        "testcase",
        classname=f"rulesched.{suite.name}",
        name=case.name,
        file=suite.file,
        time=f"{case.seconds:.6f}",
    )
    if case.status != "passed":
        tag = "error" if case.error else "failure"
        child = ET.SubElement(element, tag, message=(case.error or case.failures[0]).splitlines()[0])
        child.text = case_text(case)


def _suite_element(parent: ET.Element, suite: SuiteResult) -> None:
    errors = suite.count("error") + (1 if suite.error else 0)
    element = ET.SubElement(
        parent,
        "testsuite",
        name=suite.name,
        file=suite.file,
        tests=str(len(suite.cases) + (1 if suite.error else 0)),
        failures=str(suite.count("failed")),
        errors=str(errors),
        time=f"{sum(c.seconds for c in suite.cases):.6f}",
    )
    ET.SubElement(element, "properties").append(ET.Element("property", name="celEngine", value=suite.engine))
    if suite.error:
        load = ET.SubElement(element, "testcase", classname=f"rulesched.{suite.name}", name="(load)", file=suite.file)
        ET.SubElement(load, "error", message=suite.error.splitlines()[0]).text = suite.error
    for case in suite.cases:
        _testcase(element, suite, case)


def _problem_element(parent: ET.Element, problem: Problem) -> None:
    element = ET.SubElement(parent, "testsuite", name=problem.file, file=problem.file, tests="1", failures="0")
    element.set("errors", "1")
    case = ET.SubElement(element, "testcase", classname="rulesched", name="(load)", file=problem.file)
    ET.SubElement(case, "error", message=str(problem).splitlines()[0]).text = str(problem)


def junit_xml(suites: Sequence[SuiteResult], problems: Sequence[Problem]) -> ET.ElementTree:
    """The results as JUnit XML: problems first, each as a suite with one errored case."""
    root = ET.Element("testsuites", name="rulesched test")
    for problem in problems:
        _problem_element(root, problem)
    for suite in suites:
        _suite_element(root, suite)
    for total in ("tests", "failures", "errors"):
        root.set(total, str(sum(int(s.get(total, "0")) for s in root)))
    return ET.ElementTree(root)


def write_junit(path: Path, suites: Sequence[SuiteResult], problems: Sequence[Problem]) -> None:
    tree = junit_xml(suites, problems)
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
