"""The reviewer's report: one self-contained HTML file per batch, built from its evidence.

statistics  intervals, pass^k and the gate's chance: pure functions of counts
text        bounded reads of saved files, and text cut to what a page can hold
summary     the counts, rates and gate chances of a receipt, and the grid's outcomes
attempts    one attempt's evidence as shown: solution, findings, diff, feedback, logs
view        the whole report's content, read from a run directory
render      the jinja2 template, and write_report
"""
