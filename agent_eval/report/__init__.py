"""The reviewer's report: one self-contained HTML file per batch, built from its evidence.

statistics  intervals, pass^k and the gate's chance: pure functions of counts
"""
