"""Packs what scripts/build_wheel.sh staged in payload/ beside this file
into the mooncake-transfer-engine wheel. Nothing is compiled here: CMake
built the extensions, the script fixed their RUNPATH and bundled libtent;
this only tags the wheel for this interpreter and platform and lays the
payload out in site-packages as it is."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
PAYLOAD = os.path.join(HERE, "payload")
VERSION = os.environ.get("TENT_WHEEL_VERSION", "")

if not VERSION or not os.path.isdir(PAYLOAD):
    raise SystemExit("setup.py packs a staged payload and is driven by "
                     "scripts/build_wheel.sh; run that script instead")


class BinaryDistribution(Distribution):
    """The payload holds compiled extensions: a platform wheel, in platlib."""

    def has_ext_modules(self):
        return True


class CopyPayload(build_ext):
    """build_ext runs because the distribution has extension modules; it
    copies the prebuilt payload (extensions, stubs, bundled libraries)
    into the build tree that bdist_wheel installs from."""

    def run(self):
        shutil.copytree(PAYLOAD, self.build_lib, dirs_exist_ok=True)


setup(version=VERSION, packages=[], py_modules=[],
      distclass=BinaryDistribution, cmdclass={"build_ext": CopyPayload})
