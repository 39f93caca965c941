"""The tools, apart from the formula and the teaching material: commands for
learners, teachers and maintainers. Each runs as ``python -m mha_lists.tools.NAME``.

=========================  ====================================================
cli.py                     python -m mha_lists: the whole trace of the example
site.py, site_files/       the trace as a web page that computes in the browser
worksheet.py               a worksheet and answer key per student
exercises.py               nbgrader-style exercises: student copies, scoring
bench.py                   how fast pure-Python attention is
induction.py               train an induction head from scratch, and report its heads
=========================  ====================================================
"""
