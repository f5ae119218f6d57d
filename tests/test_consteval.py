import pytest

from perflsp.kernels.consteval import ConstEnv, evaluate, try_evaluate


@pytest.fixture
def env():
    return ConstEnv(
        macros={"N": "1024", "BLOCK": "(256)", "GRID": "((N + BLOCK - 1) / BLOCK)", "LOOP": "LOOP + 1"},
        constants={"n": "1 << 20", "grid": "dim3(GRID, 2)"},
        unknown={"m": "is a parameter of the enclosing function"},
    )


@pytest.mark.parametrize(
    "text,value",
    [
        ("(n + 255) / 256", 4096),
        ("GRID", 4),
        ("dim3(16, 16)", (16, 16, 1)),
        ("{32, 8}", (32, 8, 1)),
        ("grid", (4, 2, 1)),
        ("grid.y", 2),
        ("N * N * sizeof(float)", 4 * 1024 * 1024),
        ("(int)ceil(N / 32.0)", 32),
        ("-7 / 2", -3),  # C truncates toward zero
        ("-7 % 2", -1),
        ("0x10u", 16),
        ("1'000", 1000),
        ("static_cast<int>(3.7)", 3),
        ("N > 512 ? 128 : 64", 128),
        ("std::min(N, 64)", 64),
        ("sizeof(float4)", 16),
        ("2.5f", 2.5),
    ],
)
def test_folds(env, text, value):
    assert evaluate(text, env) == value


@pytest.mark.parametrize(
    "text,reason",
    [
        ("m + 1", "`m` is a parameter of the enclosing function"),
        ("LOOP", "`LOOP` is defined in terms of itself"),
        ("foo(3)", "calls `foo()`"),
        ("x + 1", "depends on `x`"),
        ("", "empty expression"),
    ],
)
def test_unknown_has_reason(env, text, reason):
    value, why = try_evaluate(text, env)
    assert value is None
    assert why == reason


def test_garbage_never_raises(env):
    for text in ["((", "1 +", "a[", "\"str\"", "@@", "dim3(1,2,3,4)", "1/0"]:
        value, why = try_evaluate(text, env)
        assert value is None and why
