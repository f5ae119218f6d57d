"""Static constant members of classes (`x128::size`, `v.size` for `x128 v;`), in the shape of
a packed 128-bit vector type: small programs of our own."""

from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.static_members import static_member_value
from tests.engine_reports import kernel_reports

PACKED = """
typedef float floatX;
template <class ElementType>
struct alignas(16) Packed128 {
    static constexpr const int size = sizeof(int4) / sizeof(ElementType);
    ElementType payload[size];
};
typedef Packed128<floatX> x128;
typedef Packed128<double> d128;
struct Tile { static const int rows = 8; };
"""


def _env() -> ConstEnv:
    env = ConstEnv()
    env.type_aliases.update({"floatX": "float", "x128": "Packed128<floatX>", "d128": "Packed128<double>"})
    return env


def test_a_static_member_of_a_class_template_instance_folds_with_its_arguments():
    assert static_member_value("x128::size", _env(), [PACKED]) == 4  # 16 bytes of floats
    assert static_member_value("d128::size", _env(), [PACKED]) == 2
    assert static_member_value("Packed128<short>::size", _env(), [PACKED]) == 8
    assert static_member_value("Tile::rows", _env(), [PACKED]) == 8
    assert static_member_value("Tile::cols", _env(), [PACKED]) is None
    assert static_member_value("size", _env(), [PACKED]) is None


KERNELS = PACKED + """
__global__ void scale(float *out, const float *inp, int n) {
    int i = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (i >= n) return;
    for (int k = 0; k < x128::size; ++k) out[i + k] = 2.0f * inp[i + k];
}
__global__ void tanh_all(float *out, const float *inp) {
    int i = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    x128 packed;
    for (int k = 0; k < packed.size; ++k) out[i + k] = tanhf(inp[i + k]);
}
int main() { float *o, *a; int n = 1 << 24; scale<<<n / 4 / 256, 256>>>(o, a, n); tanh_all<<<n / 4 / 256, 256>>>(o, a); }
"""


def test_loops_over_a_static_member_run_its_value():
    reports = kernel_reports(KERNELS)
    for name in ("scale", "tanh_all"):
        (loop,) = reports[name].facts.loops
        assert (loop.trip_count, loop.origin) == (4, "constant"), name  # not the 32 of an unknown bound
