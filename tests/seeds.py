"""seeds.py HEADER DUMP: an outside program recomputes a run's inputs.
Reads NAME_x_SEED and NAME_x_DIMS of every tensor the driver fills from
the generated header (f32 models), computes each element as
cfrt_uniform(seed, row-major index) does (splitmix64, runtime/cfrt.h),
and compares with the driver's --dump-inputs file (doubles, in the
order of the header's seeds). Exits 1 at the first difference."""
import re
import struct
import sys

M = (1 << 64) - 1


def uniform_f32(seed, index):
    z = (seed * 0xD1B54A32D192ED03 + (index + 1) * 0x9E3779B97F4A7C15) & M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    z ^= z >> 31
    return (z >> 40) / 8388608.0 - 1.0


head = open(sys.argv[1]).read()
if not re.search(r"_DTYPE CFRT_F32\b", head):
    sys.exit("seeds.py: an f32 model is expected")
data = open(sys.argv[2], "rb").read()
pos, n = 0, 0
for name, seed in re.findall(r"#define (\w+)_SEED (\d+)u", head):
    dims = re.search(r"#define %s_DIMS \{([0-9, ]+)\}" % name, head)
    count = 1
    for d in dims[1].split(","):
        count *= int(d)
    for i in range(count):
        got = struct.unpack_from("=d", data, pos)[0]
        pos += 8
        want = uniform_f32(int(seed), i)
        if got != want:
            sys.exit("seeds.py: %s[%d] is %r, its seed %s gives %r" % (name, i, got, seed, want))
    n += 1
if n == 0 or pos != len(data):
    sys.exit("seeds.py: %d tensors, %d of %d bytes" % (n, pos, len(data)))
print("seeds.py: %d tensors, %d values recomputed" % (n, pos // 8))
