"""envh-office: OfficeQA and SpreadsheetBench behind ``envh.ActionableEnv``.

Bridges ``officeqa`` (``envh_office.qa_bridge``) and ``spreadsheetbench``
(``envh_office.sheet_bridge``); heavy modules load only when a bridge is built.
"""

__version__ = "0.1.0"
