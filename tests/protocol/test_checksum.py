"""checksum.crc32c: the C extension of the crc32c package, loaded without the package's
``__init__`` (which imports importlib.metadata and email: ~10 ms of a broker's first produce)."""

import subprocess
import sys


def test_crc32c_is_the_packages_without_its_init():
    code = ("import sys\n"
            "from minibroker_protocol import checksum\n"
            "first = checksum.crc32c(b'123456789')\n"
            "print(hex(first), type(checksum.crc32c).__name__,\n"
            "      sorted(m for m in ('crc32c', 'importlib.metadata', 'email') if m in sys.modules))\n"
            "import crc32c\n"
            "print(all(checksum.crc32c(b) == crc32c.crc32c(b) for b in (b'', b'a', bytes(range(256)) * 9)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    # 0xe3069283: CRC-32C's check value (RFC 3720, B.4); the builtin C function, no package
    assert out.stdout.split("\n")[:2] == ["0xe3069283 builtin_function_or_method []", "True"], out
