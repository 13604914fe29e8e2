"""Label keys pinwheel sets on images: one prefix for all of them."""

PREFIX = "io.pinwheel"
BASE_SUITE = f"{PREFIX}.base.suite"  # the Debian suite of a bootstrap base
BASE_PYTHON = f"{PREFIX}.base.python"  # its interpreter's full version
SMOKE = f"{PREFIX}.smoke"  # publish: how the pushed image's smoke went
