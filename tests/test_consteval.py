import pytest

from perflsp.kernels.consteval import ConstEnv, NotConstant, evaluate, try_evaluate


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


def test_character_and_string_literals_fold():
    # `case 'n':` compares with a character's code; `atoi("256")` reads a string literal
    assert evaluate("'n'") == 110
    assert evaluate("'\\n'") == 10
    assert evaluate('atoi("256") * 2') == 512
    # a string is no number: arithmetic on it does not fold
    for text in ('"ab" + 1', '-"ab"', '"ab"'):
        with pytest.raises(NotConstant):
            evaluate(text)


def test_getopt_reads_the_program_s_arguments_as_glibc_does():
    from perflsp.kernels.command_options import getopt_call, parse_options

    assert getopt_call('(c = getopt(argc, argv, "hn:r::")) != -1') == ("getopt", "hn:r::")
    assert getopt_call("(c = next(argc)) != -1") is None
    argv = ("prog", "data.txt", "-n", "64", "-hr3", "-r", "-x", "--", "-n", "1")
    # operands are skipped (permuted), `-r` takes an optional argument only when attached, an
    # undeclared option is `?`, `--` ends the options
    assert parse_options("hn:r::", argv) == [("n", "64"), ("h", None), ("r", "3"), ("r", None), ("?", None)]
    assert parse_options("+hn:", ("prog", "data.txt", "-n", "64")) == []  # POSIX: the first operand stops
    assert parse_options("n:", ("prog", "-n")) == [("?", None)]  # a missing argument
    assert parse_options("n:", ("prog", "--size=8")) is None  # a long option: not certain


def test_a_function_of_one_return_folds_where_its_arguments_do():
    from perflsp.kernels.program import ProgramModel
    from perflsp.kernels.extract import extract
    from perflsp.source.parser import parse

    src = b"""
int iDivUp(int a, int b) { return (a % b != 0) ? (a / b + 1) : (a / b); }
template <typename T> constexpr T log2i(T n) { return n <= 1 ? 0 : 1 + log2i(n / 2); }
int byRef(int &a) { return a; }
int bumps(int a) { return a++; }
int twoSteps(int a) { int b = a * 2; return b; }
"""
    tree = parse(src)
    env = ProgramModel(src, tree, extract(src, tree)).env
    assert try_evaluate("iDivUp(1000, 256) * 256", env) == (1024, None)
    assert try_evaluate("log2i(1 << 20)", env) == (20, None)  # (recursive: the chosen branch only)
    # a local initialised once and returned: the body reads as one expression (`return_forms`)
    assert try_evaluate("twoSteps(3)", env) == (6, None)
    # a reference parameter, a side effect, the wrong number of arguments: not folded
    for call in ("byRef(3)", "bumps(3)", "iDivUp(3)"):
        assert try_evaluate(call, env)[0] is None


def test_sizeof_a_type_alias_is_the_size_of_the_type_it_names():
    from perflsp.kernels.program import ProgramModel
    from perflsp.kernels.extract import extract
    from perflsp.source.parser import parse

    src = b"""
typedef double real8;
typedef real8 Real_t;
typedef unsigned int *index_ptr;
using half_t = short;
typedef struct { float x, y; } point;
"""
    tree = parse(src)
    env = ProgramModel(src, tree, extract(src, tree)).env
    assert try_evaluate("1024 * sizeof(Real_t)", env) == (8192, None)  # (through another alias)
    assert try_evaluate("sizeof(index_ptr)", env) == (8, None)
    assert try_evaluate("sizeof(half_t)", env) == (2, None)
    assert try_evaluate("sizeof(point)", env) == (None, "sizeof(point) is not known here")


def test_strcmp_of_known_strings_folds():
    env = ConstEnv(argv=("prog", "-n", "64"))
    assert evaluate('strcmp(argv[1], "-n") == 0', env) == 1
    assert evaluate('!strcmp(argv[2], "-n")', env) == 0
    assert evaluate('strcmp("a", "b")', env) == -1
    value, reason = try_evaluate('strcmp(name, "-n")', env)
    assert value is None and reason is not None
