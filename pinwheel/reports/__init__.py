"""Views of the Plan: what `pinwheel report` and `pinwheel bump` print.

- ``report``: the conflict report of one resolved Plan (rich table or JSON ``pinwheel.report/1``).
- ``bump``: two Plans compared, today's image and the image after a version bump (``pinwheel.bump/1``).
"""
