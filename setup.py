"""Build hook for the native core: cffi compiles agent/c into edgesynth.runtimes._es_native.

Everything else is in pyproject.toml. ``cffi_modules`` is not a pyproject key,
so it goes through setup(). Where no C compiler works the build is skipped with
a warning and host_tools/runtimes/native.py falls back to the Python agent.
"""
from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError

SKIPPED = "WARNING: edgesynth native core not built (%s); the native runtime will use the Python agent"


class OptionalBuildExt(build_ext):
    def run(self):
        try:
            super().run()
        except (CCompilerError, ExecError, PlatformError, OSError) as e:
            self.warn(SKIPPED % e)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except (CCompilerError, ExecError, PlatformError, OSError) as e:
            self.warn(SKIPPED % e)


setup(cffi_modules=["host_tools/runtimes/native_build.py:ffibuilder"], cmdclass={"build_ext": OptionalBuildExt})
