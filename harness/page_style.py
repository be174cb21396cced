"""The report page's style sheet and the CSS class of a verdict line: kept together
because each class verdict_class makes must have its colour in CSS (harness/report.py's
page and harness/hardware.py's section both colour their verdict lines here)."""

from __future__ import annotations

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1100px;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em;overflow-wrap:anywhere}h2{font-size:1.25em;border-bottom:1px solid #ddd;
padding-bottom:.2em;margin-top:2em}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.88em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right;vertical-align:top}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
table.kv th{text-align:left;white-space:nowrap}table.kv td{text-align:left;overflow-wrap:anywhere}
figure{margin:1.2em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.88em;color:#444}
.verdict{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em;padding:.3em .5em;
margin:.2em 0;border-left:4px solid #999;background:#fafafa;white-space:pre-wrap;
overflow-wrap:anywhere}
.v-PASS,.v-OK,.v-BITWISE,.v-REPRODUCED{border-color:#2a7}
.v-DIFFERENT,.v-FAIL,.v-REGRESSION,.v-NOTREPRODUCED,.v-ERROR{border-color:#c33}
.v-INCONCLUSIVE,.v-WARN,.v-UNDECIDED,.v-NOTSHOWN{border-color:#d92}
table.verdicts td,table.verdicts th{text-align:left}td.outcome{font-weight:600;border-left-width:4px}
td.v-PASS,td.v-OK,td.v-BITWISE,td.v-REPRODUCED{color:#186;background:#eaf7ef}
td.v-DIFFERENT,td.v-FAIL,td.v-REGRESSION,td.v-NOTREPRODUCED,td.v-ERROR{color:#a22;
background:#fbeaea}
td.v-INCONCLUSIVE,td.v-WARN,td.v-UNDECIDED,td.v-NOTSHOWN{color:#965;background:#fdf3e1}
ul.detail{margin:.2em 0 0 1em;padding-left:1em;color:#555;font-size:.95em}
.muted{color:#666;font-size:.88em}p.table-files{margin-top:-.6em}code{font-size:.92em;overflow-wrap:anywhere}
pre{white-space:pre-wrap;overflow-wrap:anywhere}li{overflow-wrap:anywhere}
"""


def verdict_class(verdict: str) -> str:
    """The CSS class of a verdict ("PASS (bitwise identical)" -> "v-PASS"): its first word,
    or its first two when the first is NOT (NOT REPRODUCED, NOT SHOWN would otherwise
    share NOT's colour); an empty verdict is a warning."""
    words = str(verdict).upper().split() or ["WARN"]
    word = "".join(words[:2]) if words[0] == "NOT" else words[0]
    return "v-" + "".join(ch for ch in word if ch.isalnum())
