/* graph/parse.c: expression strings <-> fns (the parser and the printer).
 *
 * Parser: "(a, b, ...) -> expr" becomes a new fn of the graph. A lexer makes
 * tokens on demand (numbers, names, symbols) with their line and column; a
 * precedence-climbing parser builds the expression bottom-up with
 * graph_fn_add, so the fn is hash-consed as it grows. It keeps the
 * constructs still open in a stack of frames on the heap instead of
 * recursing (see "parser" below), so its stack use does not grow with
 * nesting: any input is a result or an error on a small thread stack, and
 * depth is limited only by memory (one 40-byte frame per open parenthesis,
 * prefix operator, call and operator awaiting its right operand). Operator
 * and call names come from the op table (graph_ops); this file adds only the
 * grammar (precedence levels), the aliases (&&, ||, !, and call names
 * NumPy and numexpr users type: pow, power, arcsin, ...), the casts (named
 * by lf_dtype_name) and the constants pi, e, inf, nan.
 *
 * Invariants:
 *  - the first error wins: it is recorded once, as "parse error at L:C: msg"
 *    with C the column of the offending token's first character (the end of
 *    input for a missing token), and every caller then unwinds (-1 / NULL);
 *  - nothing recurses (parser, printer): stack use is the same at any depth,
 *    and the text lf_fn_print writes for an fn of any depth parses back;
 *  - a parameter may be named like a constant (e, pi, inf, nan: numexpr's
 *    own "(b, c, d, e) -> b*c+d*e") and then hides it in that fn;
 *  - unary minus applied directly to a literal or constant name folds into a
 *    negative constant, unless the literal is the base of ** (-2**2 is
 *    -(2**2)); the printer relies on this to write negative constants as
 *    "(-0.5)", and writes the negation of a literal as "-(0.5)".
 *
 * Printer: minimal parentheses from the same precedence levels, integer
 * constants with %lld, float constants with the fewest of 15..17 significant
 * digits that read back exactly (always with '.', 'e', "inf" or "nan"; "1e999"
 * for infinity in an fn with a parameter named inf; a parameter named nan
 * leaves no way to write NaN, so such an fn has no NaN constant). It is
 * iterative (an explicit work stack) and writes nothing past the buffer; the
 * full length comes from per-expression lengths computed first. Number
 * formatting uses the C library (strtod, snprintf), so the program's locale
 * must use '.' as the decimal point, as the "C" locale does.
 */
#include "graph/graph.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Precedence levels, rising; ATOM is a name, literal, call or parenthesis. */
enum {
    P_NONE, P_OR, P_AND, P_NOT, P_CMP, P_BOR, P_BXOR, P_BAND, P_SHIFT, P_ADD, P_MUL, P_UNARY,
    P_POW, P_ATOM
};

/* The grammar's level of each operator written as a symbol or keyword. A new
 * INFIX or PREFIX operator in the op table needs a line here. */
static int op_prec(lf_op op) {
    switch (op) {
    case LF_OP_OR: return P_OR;
    case LF_OP_AND: return P_AND;
    case LF_OP_NOT: return P_NOT;
    case LF_OP_LT: case LF_OP_LE: case LF_OP_GT: case LF_OP_GE: case LF_OP_EQ: case LF_OP_NE:
        return P_CMP;
    case LF_OP_BITOR: return P_BOR;
    case LF_OP_BITXOR: return P_BXOR;
    case LF_OP_BITAND: return P_BAND;
    case LF_OP_LSHIFT: case LF_OP_RSHIFT: return P_SHIFT;
    case LF_OP_ADD: case LF_OP_SUB: return P_ADD;
    case LF_OP_MUL: case LF_OP_DIV: case LF_OP_FLOORDIV: case LF_OP_MOD: return P_MUL;
    case LF_OP_NEG: case LF_OP_BITNOT: return P_UNARY;
    case LF_OP_POW: return P_POW;
    default: return P_ATOM;
    }
}

/* Named constants (float literals). */
static const struct {
    const char *name;
    double value;
} named_consts[] = {
    {"pi", 3.14159265358979323846},
    {"e", 2.71828182845904523536},
    {"inf", INFINITY},
    {"nan", NAN},
};
#define NCONSTS ((int)(sizeof named_consts / sizeof named_consts[0]))

/* Call names besides the op table's: NumPy's and numexpr's spellings. The
 * printer writes the table's name (arcsin(x) prints as asin(x)). */
static const struct {
    const char *name;
    lf_op op;
} call_aliases[] = {
    {"pow", LF_OP_POW},        {"power", LF_OP_POW},       {"absolute", LF_OP_ABS},
    {"minimum", LF_OP_MIN},    {"maximum", LF_OP_MAX},     {"arcsin", LF_OP_ASIN},
    {"arccos", LF_OP_ACOS},    {"arctan", LF_OP_ATAN},     {"arctan2", LF_OP_ATAN2},
    {"arcsinh", LF_OP_ASINH},  {"arccosh", LF_OP_ACOSH},   {"arctanh", LF_OP_ATANH},
};
#define NALIASES ((int)(sizeof call_aliases / sizeof call_aliases[0]))

/* Symbols besides the op table's: punctuation and aliases. */
static const char *const extra_syms[] = {"(", ")", ",", "->", "&&", "||", "!"};
#define NEXTRA ((int)(sizeof extra_syms / sizeof extra_syms[0]))

/* ==== lexer ==================================================================== */

typedef enum tok_kind {
    T_EOF,
    T_NUM,     /* integer (is_int, u) or float (f) literal */
    T_NAME,    /* identifier or keyword */
    T_SYM,     /* operator or punctuation */
    T_BADCHAR, /* a character no token starts with */
    T_BADNUM   /* a malformed number */
} tok_kind;

typedef struct token {
    tok_kind kind;
    const char *s;  /* first character in the source */
    size_t len;     /* characters */
    int line, col;  /* 1-based position of s */
    bool is_int;    /* T_NUM: integer literal */
    bool too_big;   /* T_NUM integer: above 2^63 */
    uint64_t u;     /* T_NUM integer value (up to 2^63) */
    double f;       /* T_NUM float value; integer: its nearest double */
    int digits;     /* T_NUM integer: significant digits (no leading zeros) */
    uint64_t hi, lo; /* T_NUM integer of at most GRAPH_BEYOND_DIGITS digits:
                       value = hi * 10^19 + lo */
} token;

typedef struct parser {
    lf_graph *g;                    /* where the fn and errors go */
    const char *pos;                /* lexer position: just after tok */
    int line, col;                  /* position of pos (col saturates) */
    token tok;                      /* current token */
    lf_fn *fn;                      /* the fn being built (after the parameter list) */
    int nparams;                    /* parameters seen so far */
    const char *pname[LF_MAX_ARGS]; /* parameter names, pointing into the source */
    size_t plen[LF_MAX_ARGS];       /* their lengths */
    bool failed;                    /* an error was recorded */
} parser;

static bool is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_alnum(int c) { return is_alpha(c) || is_digit(c); }

static bool tok_is(const token *t, const char *s) {
    return (t->kind == T_NAME || t->kind == T_SYM) && s[0] == t->s[0] && strlen(s) == t->len &&
           memcmp(t->s, s, t->len) == 0;
}

/* Advances p->pos by n characters of one line. */
static void skip(parser *p, size_t n) {
    p->pos += n;
    p->col = n > (size_t)(INT_MAX - p->col) ? INT_MAX : p->col + (int)n;
}

/* Lexes a number at p->pos into t: digits [. digits] [e [+-] digits], or
 * starting with '.'. Anything glued to it makes it T_BADNUM. */
static void lex_number(parser *p, token *t) {
    const char *s = p->pos, *q = s;
    bool ok = true;
    t->is_int = true;
    while (is_digit(*q)) q++;
    if (*q == '.') {
        t->is_int = false;
        q++;
        while (is_digit(*q)) q++;
    }
    if (*q == 'e' || *q == 'E') {
        t->is_int = false;
        q++;
        if (*q == '+' || *q == '-') q++;
        if (!is_digit(*q)) ok = false;
        while (is_digit(*q)) q++;
    }
    if (is_alnum(*q) || *q == '.') ok = false;
    if (!ok) {
        while (is_alnum(*q) || *q == '.') q++;
        t->kind = T_BADNUM;
    } else if (t->is_int) {
        t->kind = T_NUM;
        uint64_t u = 0;
        for (const char *d = s; d < q; d++) {
            uint64_t digit = (uint64_t)(*d - '0');
            if (u > ((uint64_t)1 << 63) / 10 || u * 10 > ((uint64_t)1 << 63) - digit) {
                t->too_big = true;
                break;
            }
            u = u * 10 + digit;
        }
        t->u = u;
        t->f = strtod(s, NULL); /* beyond int64: its nearest double (fn_expr.beyond) */
        const char *d = s;
        while (d < q - 1 && *d == '0') d++;
        t->digits = (int)(q - d);
        t->hi = t->lo = 0;
        if (t->digits <= GRAPH_BEYOND_DIGITS) { /* the exact value, for messages and printing */
            const char *split = q - d > 19 ? q - 19 : d;
            for (const char *c = d; c < split; c++) t->hi = t->hi * 10 + (uint64_t)(*c - '0');
            for (const char *c = split; c < q; c++) t->lo = t->lo * 10 + (uint64_t)(*c - '0');
        }
    } else {
        t->kind = T_NUM;
        t->f = strtod(s, NULL); /* the span was checked, strtod reads exactly it */
    }
    t->len = (size_t)(q - s);
    skip(p, t->len);
}

/* Lexes the token at p->pos into t (no error is recorded here). */
static void lex(parser *p, token *t) {
    for (;;) {
        char c = *p->pos;
        if (c == '\n') {
            p->pos++;
            if (p->line < INT_MAX) p->line++;
            p->col = 1;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            skip(p, 1);
        } else {
            break;
        }
    }
    memset(t, 0, sizeof *t);
    t->s = p->pos;
    t->line = p->line;
    t->col = p->col;
    char c = *p->pos;
    if (c == '\0') {
        t->kind = T_EOF;
    } else if (is_digit(c) || (c == '.' && is_digit(p->pos[1]))) {
        lex_number(p, t);
    } else if (is_alpha(c)) {
        size_t n = 1;
        while (is_alnum(p->pos[n])) n++;
        t->kind = T_NAME;
        t->len = n;
        skip(p, n);
    } else {
        size_t best = 0; /* longest symbol that matches here */
        for (int i = 0; i < LF_NOPS + NEXTRA; i++) {
            const char *sym = i < LF_NOPS ? graph_ops[i].text : extra_syms[i - LF_NOPS];
            if (sym[0] != c) continue;
            size_t n = strlen(sym);
            if (n > best && !is_alpha(sym[0]) && strncmp(p->pos, sym, n) == 0) best = n;
        }
        t->kind = best ? T_SYM : T_BADCHAR;
        t->len = best ? best : 1;
        skip(p, t->len);
    }
}

/* ==== errors ================================================================= */

/* Records "parse error at L:C: msg" at token t, once. Returns -1. */
__attribute__((format(printf, 3, 4)))
static int fail_at(parser *p, const token *t, const char *fmt, ...) {
    if (p->failed) return -1;
    p->failed = true;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    graph_fail(p->g, LF_ERR_PARSE, "parse error at %d:%d: %s", t->line, t->col, msg);
    return -1;
}

/* Token text for messages, cut to 40 characters. */
#define TOKFMT "%.*s"
#define TOKARG(t) (int)((t)->len > 40 ? 40 : (t)->len), (t)->s

/* "unexpected X" for the current token. */
static int unexpected(parser *p) {
    const token *t = &p->tok;
    if (t->kind == T_EOF) return fail_at(p, t, "unexpected end of input");
    return fail_at(p, t, "unexpected '" TOKFMT "'", TOKARG(t));
}

/* Makes the next token current; a lexing error is reported as it arrives. */
static bool next(parser *p) {
    lex(p, &p->tok);
    const token *t = &p->tok;
    if (t->kind == T_BADNUM) {
        fail_at(p, t, "malformed number '" TOKFMT "'", TOKARG(t));
    } else if (t->kind == T_BADCHAR) {
        unsigned char c = (unsigned char)t->s[0];
        if (c >= 0x20 && c < 0x7f)
            fail_at(p, t, "unexpected character '%c'", c);
        else
            fail_at(p, t, "unexpected byte 0x%02X", c);
    }
    return !p->failed;
}

/* The token after the current one, without consuming anything. */
static token peek(parser *p) {
    const char *pos = p->pos;
    int line = p->line, col = p->col;
    token t;
    lex(p, &t);
    p->pos = pos;
    p->line = line;
    p->col = col;
    return t;
}

/* Consumes the current token if it is s, else reports "expected 's'". */
static bool expect(parser *p, const char *s) {
    if (p->failed) return false;
    if (!tok_is(&p->tok, s)) {
        fail_at(p, &p->tok, "expected '%s'", s);
        return false;
    }
    return next(p);
}

/* ==== names ================================================================== */

/* Index of the named constant t, or -1. */
static int const_index(const token *t) {
    for (int i = 0; i < NCONSTS; i++)
        if (tok_is(t, named_consts[i].name)) return i;
    return -1;
}

/* The dtype a cast name t means, or LF_NDTYPES. */
static lf_dtype cast_dtype(const token *t) {
    for (int d = 0; d < LF_NDTYPES; d++)
        if (tok_is(t, lf_dtype_name((lf_dtype)d))) return (lf_dtype)d;
    return LF_NDTYPES;
}

/* The op of syntax syn spelled t (aliases included), or LF_NOPS. */
static lf_op find_op(const token *t, op_syntax syn) {
    for (int i = 0; i < LF_NOPS; i++)
        if (graph_ops[i].syntax == syn && tok_is(t, graph_ops[i].text)) return (lf_op)i;
    if (syn == OPSYN_INFIX && tok_is(t, "&&")) return LF_OP_AND;
    if (syn == OPSYN_INFIX && tok_is(t, "||")) return LF_OP_OR;
    if (syn == OPSYN_PREFIX && tok_is(t, "!")) return LF_OP_NOT;
    if (syn == OPSYN_CALL)
        for (int i = 0; i < NALIASES; i++)
            if (tok_is(t, call_aliases[i].name)) return call_aliases[i].op;
    return LF_NOPS;
}

/* True when the name t is taken by the language (keyword, call, cast, constant). */
static bool reserved(const token *t) {
    for (int i = 0; i < LF_NOPS; i++)
        if (tok_is(t, graph_ops[i].text)) return true;
    return find_op(t, OPSYN_CALL) != LF_NOPS || cast_dtype(t) != LF_NDTYPES || const_index(t) >= 0;
}

static int param_index(const parser *p, const token *t) {
    for (int i = 0; i < p->nparams; i++)
        if (t->len == p->plen[i] && memcmp(t->s, p->pname[i], t->len) == 0) return i;
    return -1;
}

/* ==== expression builders ====================================================== */

static int add(parser *p, const fn_expr *e) {
    int id = graph_fn_add(p->fn, e);
    if (id < 0) p->failed = true; /* graph_fn_add recorded the error */
    return id;
}

static int mk_op(parser *p, lf_op op, int a, int b, int c) {
    fn_expr e = graph_fn_blank_expr(EXPR_OP);
    e.op = op;
    int args[3] = {a, b, c};
    for (int k = 0; k < graph_ops[op].arity; k++) e.arg[k] = args[k];
    return add(p, &e);
}

static int mk_float(parser *p, double v) {
    fn_expr e = graph_fn_blank_expr(EXPR_CONST);
    e.value.f = v;
    return add(p, &e);
}

/* An integer literal beyond int64, by its nearest double (fn_expr.beyond). */
static int mk_beyond(parser *p, const token *t, bool negative) {
    fn_expr e = graph_fn_blank_expr(EXPR_CONST);
    e.value.f = negative ? -t->f : t->f;
    e.beyond = true;
    e.big_hi = t->hi;
    e.big_lo = t->lo;
    return add(p, &e);
}

static int mk_int(parser *p, int64_t v) {
    fn_expr e = graph_fn_blank_expr(EXPR_CONST);
    e.is_int = true;
    e.value.i = v;
    return add(p, &e);
}

/* ==== parser ==================================================================== */

/* The grammar is read by one loop over an explicit stack of frames on the
 * heap, never by recursion: a frame is a construct still waiting for an
 * operand. Each kind is what one function of a recursive-descent parser
 * would keep in its locals:
 *   F_EXPR    an expression whose binary operators have level >= prec: the
 *             left operand so far and the operator waiting for its right one;
 *   F_PREFIX  a prefix operator (-, +, not, !) waiting for its operand;
 *   F_PAREN   '(' waiting for its expression, then ')';
 *   F_CALL    a call or cast waiting for its next argument.
 * The loop alternates two steps: with `want` set it reads the start of an
 * operand for the F_EXPR frame on top (a prefix operator or '(' or a call's
 * '(' pushes frames; a literal or name is a value at once); otherwise it
 * hands the value just finished to the frame on top, which consumes what
 * follows (an infix operator, ')' or ',') and either asks for another
 * operand or is done and passes its own value down. Tokens are consumed
 * and expressions added in the same order as the recursive form, so the
 * messages and expression ids are those of a recursive-descent parser. */
typedef enum frame_kind { F_EXPR, F_PREFIX, F_PAREN, F_CALL } frame_kind;

typedef struct frame {
    unsigned char kind; /* frame_kind */
    unsigned char prec; /* F_EXPR: least level of the binary operators it takes */
    bool compared;      /* F_EXPR: its last operator was a comparison */
    lf_op op;           /* F_EXPR: the operator waiting for its right operand
                         * (LF_NOPS before the first); F_PREFIX: the operator
                         * (LF_NOPS: unary plus); F_CALL: the op called
                         * (LF_NOPS: a cast) */
    int arg[3];         /* F_EXPR: arg[0] the left operand; F_CALL: arguments */
    int nargs;          /* F_CALL: arguments read (saturates at INT_MAX) */
    int line, col;      /* F_CALL: position of the name */
    const char *name;   /* F_CALL: the name, in the source */
    const graph_ufn *ufn; /* F_CALL: a user function of the graph (lf_fn_c), else NULL */
} frame;

typedef struct fstack {
    frame *f;   /* graph_malloc'd */
    size_t n;   /* frames in use */
    size_t cap; /* frames allocated */
} fstack;

/* Pushes a blank frame of kind k; NULL (error recorded) when out of memory. */
static frame *push(parser *p, fstack *st, frame_kind k) {
    if (st->n == st->cap) {
        size_t cap = st->cap ? 2 * st->cap : 64;
        frame *f = cap <= SIZE_MAX / 2 / sizeof *f ? graph_realloc(st->f, cap * sizeof *f) : NULL;
        if (!f) {
            graph_fail(p->g, LF_ERR_NOMEM, "fn_parse: out of memory");
            p->failed = true;
            return NULL;
        }
        st->f = f;
        st->cap = cap;
    }
    frame *f = &st->f[st->n++];
    memset(f, 0, sizeof *f);
    f->kind = (unsigned char)k;
    f->op = LF_NOPS;
    f->arg[0] = f->arg[1] = f->arg[2] = -1;
    return f;
}

static bool push_expr(parser *p, fstack *st, int prec) {
    frame *f = push(p, st, F_EXPR);
    if (f) f->prec = (unsigned char)prec;
    return f != NULL;
}

/* A literal (the current token is a number). */
static int parse_number(parser *p) {
    const token *t = &p->tok;
    bool is_int = t->is_int;
    lf_scalar v;
    if (is_int) v.i = (int64_t)t->u;
    else v.f = t->f;
    bool beyond = is_int && (t->too_big || t->u > INT64_MAX);
    if (beyond && t->digits > GRAPH_BEYOND_DIGITS)
        return fail_at(p, t, "integer literal out of range (more than %d digits)", GRAPH_BEYOND_DIGITS);
    token lit = *t;
    if (!next(p)) return -1;
    if (beyond) return mk_beyond(p, &lit, false);
    return is_int ? mk_int(p, v.i) : mk_float(p, v.f);
}

/* A name that is not called: parameter or constant. */
static int parse_name(parser *p) {
    const token *t = &p->tok;
    int i = param_index(p, t);
    if (i >= 0) {
        if (!next(p)) return -1;
        fn_expr e = graph_fn_blank_expr(EXPR_PARAM);
        e.param = i;
        return add(p, &e);
    }
    if ((i = const_index(t)) >= 0) {
        if (!next(p)) return -1;
        return mk_float(p, named_consts[i].value);
    }
    if (find_op(t, OPSYN_CALL) != LF_NOPS || cast_dtype(t) != LF_NDTYPES)
        return fail_at(p, t, "expected '(' after '" TOKFMT "'", TOKARG(t));
    if (reserved(t)) return unexpected(p); /* a keyword out of place */
    return fail_at(p, t, "unknown name '" TOKFMT "'", TOKARG(t));
}

/* The name token of call frame f, for messages. */
static token call_name(const frame *f) {
    token t;
    memset(&t, 0, sizeof t);
    t.kind = T_NAME;
    t.s = f->name;
    while (is_alnum(t.s[t.len])) t.len++;
    t.line = f->line;
    t.col = f->col;
    return t;
}

/* The start of a call: name '(' with the name the current token. Checks the
 * name, consumes both tokens and fills call frame f. */
static bool open_call(parser *p, frame *f) {
    token name = p->tok;
    lf_op op = find_op(&name, OPSYN_CALL);
    if (op == LF_NOPS && cast_dtype(&name) == LF_NDTYPES && param_index(p, &name) < 0)
        for (const graph_ufn *u = p->g->ufns; u && !f->ufn; u = u->next) /* a user function by name */
            if (strlen(u->name) == name.len && !memcmp(u->name, name.s, name.len)) f->ufn = u;
    if (op == LF_NOPS && cast_dtype(&name) == LF_NDTYPES && !f->ufn) {
        if (param_index(p, &name) >= 0 || reserved(&name))
            fail_at(p, &name, "'" TOKFMT "' is not a function", TOKARG(&name));
        else
            fail_at(p, &name, "unknown function '" TOKFMT "'", TOKARG(&name));
        return false;
    }
    f->op = op;
    f->name = name.s;
    f->line = name.line;
    f->col = name.col;
    return next(p) && next(p); /* the name and '(' */
}

/* The end of a call: ')' after the arguments of frame f. */
static int close_call(parser *p, const frame *f) {
    if (!expect(p, ")")) return -1;
    token name = call_name(f);
    int arity = f->ufn ? f->ufn->nparams : f->op != LF_NOPS ? graph_ops[f->op].arity : 1;
    if (f->nargs != arity)
        return fail_at(p, &name, "'" TOKFMT "' takes %d argument%s, got %d", TOKARG(&name), arity,
                       arity == 1 ? "" : "s", f->nargs);
    if (f->ufn) {
        fn_expr e = graph_fn_blank_expr(EXPR_CALL);
        e.call = f->ufn;
        for (int k = 0; k < arity; k++) e.arg[k] = f->arg[k];
        return add(p, &e);
    }
    if (f->op != LF_NOPS) return mk_op(p, f->op, f->arg[0], f->arg[1], f->arg[2]);
    fn_expr e = graph_fn_blank_expr(EXPR_CAST);
    e.cast_to = cast_dtype(&name);
    e.arg[0] = f->arg[0];
    return add(p, &e);
}

/* "- literal" (the current token is '-'): folds into a negative constant
 * when the next token is a number or constant name that is not the base of
 * **. Returns the constant's id, -1 on error, or -2 when it does not apply. */
static int fold_negative(parser *p) {
    const char *pos = p->pos; /* just after the '-' */
    int line = p->line, col = p->col;
    token t;
    lex(p, &t); /* the operand, consumed silently until it is known to fold */
    int ci = t.kind == T_NAME && param_index(p, &t) < 0 ? const_index(&t) : -1; /* a parameter hides it */
    if (t.kind == T_NUM || ci >= 0) {
        token after = peek(p);
        if (!tok_is(&after, graph_ops[LF_OP_POW].text) && !tok_is(&after, "(")) {
            bool beyond = t.kind == T_NUM && t.is_int && (t.too_big || t.u > (uint64_t)1 << 63);
            if (beyond && t.digits > GRAPH_BEYOND_DIGITS)
                return fail_at(p, &t, "integer literal out of range (more than %d digits)", GRAPH_BEYOND_DIGITS);
            if (!next(p)) return -1;
            if (beyond) return mk_beyond(p, &t, true);
            if (ci >= 0) return mk_float(p, -named_consts[ci].value);
            if (!t.is_int) return mk_float(p, -t.f);
            return mk_int(p, t.u == (uint64_t)1 << 63 ? INT64_MIN : -(int64_t)t.u);
        }
    }
    p->pos = pos;
    p->line = line;
    p->col = col;
    return -2;
}

/* Reads the start of an operand of the F_EXPR frame on top of st (minprec
 * is its level: 'not' is not allowed above its own). Returns the operand's
 * id when it is complete (a literal, a name, a folded negative constant),
 * -2 when frames were pushed to read the rest, -1 on error. */
static int start_operand(parser *p, fstack *st, int minprec) {
    const token *t = &p->tok;
    lf_op op = find_op(t, OPSYN_PREFIX);
    bool plus = tok_is(t, graph_ops[LF_OP_ADD].text);
    if (op != LF_NOPS || plus) {
        int prec = plus ? P_UNARY : op_prec(op);
        if (prec < minprec)
            return fail_at(p, t, "'" TOKFMT "' needs parentheses here", TOKARG(t));
        if (op == LF_OP_NEG) {
            int k = fold_negative(p);
            if (k != -2) return k;
        }
        if (!next(p)) return -1;
        frame *f = push(p, st, F_PREFIX);
        if (!f) return -1;
        f->op = plus ? LF_NOPS : op;
        return push_expr(p, st, prec) ? -2 : -1;
    }
    if (t->kind == T_NUM) return parse_number(p);
    if (t->kind == T_NAME) {
        token after = peek(p);
        if (!tok_is(&after, "(")) return parse_name(p);
        frame *f = push(p, st, F_CALL);
        if (!f || !open_call(p, f)) return -1;
        if (tok_is(&p->tok, ")")) { /* no arguments */
            int id = close_call(p, f);
            st->n--;
            return id;
        }
        return push_expr(p, st, P_NONE) ? -2 : -1;
    }
    if (tok_is(t, "(")) {
        if (!next(p)) return -1;
        return push(p, st, F_PAREN) && push_expr(p, st, P_NONE) ? -2 : -1;
    }
    return unexpected(p);
}

/* Gives value v to the frame on top of st, which reads on. Returns the
 * value that frame passes down when it is done (it is popped), -2 when it
 * pushed a frame for another operand, -1 on error. */
static int give(parser *p, fstack *st, int v) {
    frame *f = &st->f[st->n - 1];
    switch ((frame_kind)f->kind) {
    case F_EXPR: {
        if (f->op != LF_NOPS && (v = mk_op(p, f->op, f->arg[0], v, -1)) < 0) return -1;
        lf_op op = find_op(&p->tok, OPSYN_INFIX);
        if (op == LF_NOPS || op_prec(op) < f->prec) {
            st->n--;
            return v;
        }
        int prec = op_prec(op);
        if (prec == P_CMP && f->compared)
            return fail_at(p, &p->tok, "comparisons do not chain (use 'and')");
        f->compared = prec == P_CMP;
        f->op = op;
        f->arg[0] = v;
        if (!next(p)) return -1;
        /* ** is right-associative and its exponent may be negated (2**-1). */
        return push_expr(p, st, op == LF_OP_POW ? P_UNARY : prec + 1) ? -2 : -1;
    }
    case F_PREFIX:
        st->n--;
        return f->op == LF_NOPS ? v : mk_op(p, f->op, v, -1, -1);
    case F_PAREN:
        st->n--;
        return expect(p, ")") ? v : -1;
    case F_CALL:
        if (f->nargs < 3) f->arg[f->nargs] = v;
        if (f->nargs < INT_MAX) f->nargs++;
        if (tok_is(&p->tok, ",")) {
            if (!next(p)) return -1;
            return push_expr(p, st, P_NONE) ? -2 : -1;
        }
        v = close_call(p, f);
        st->n--;
        return v;
    }
    return -1;
}

/* The expression after "->". Returns its id or -1. */
static int parse_body(parser *p) {
    fstack st = {NULL, 0, 0};
    int v = push_expr(p, &st, P_NONE) ? -2 : -1;
    for (bool want = true; v != -1;) {
        if (want) v = start_operand(p, &st, st.f[st.n - 1].prec);
        else v = give(p, &st, v);
        if (v >= 0 && st.n == 0) break; /* the outermost expression is done */
        want = v == -2;                 /* frames were pushed: read their operand */
    }
    graph_free(st.f);
    return v;
}

/* "(a, b, ...)" then "->". */
static bool parse_params(parser *p) {
    if (!expect(p, "(")) return false;
    if (tok_is(&p->tok, ")")) return next(p) && expect(p, "->"); /* () -> expr: a constant fn */
    for (;;) {
        token t = p->tok;
        if (t.kind != T_NAME) {
            if (t.kind == T_EOF) unexpected(p);
            else fail_at(p, &t, "expected a parameter name, got '" TOKFMT "'", TOKARG(&t));
            return false;
        }
        if (reserved(&t) && const_index(&t) < 0) { /* a constant's name may be taken */
            fail_at(p, &t, "parameter name '" TOKFMT "' is a builtin name", TOKARG(&t));
            return false;
        }
        if (param_index(p, &t) >= 0) {
            fail_at(p, &t, "duplicate parameter '" TOKFMT "'", TOKARG(&t));
            return false;
        }
        if (p->nparams == LF_MAX_ARGS) {
            fail_at(p, &t, "too many parameters (at most %d)", LF_MAX_ARGS);
            return false;
        }
        p->pname[p->nparams] = t.s;
        p->plen[p->nparams++] = t.len;
        if (!next(p)) return false;
        if (!tok_is(&p->tok, ",")) break;
        if (!next(p)) return false;
    }
    return expect(p, ")") && expect(p, "->");
}

/* Creates the fn with the parameter names copied out of the source. */
static bool make_fn(parser *p) {
    size_t total = 0;
    for (int i = 0; i < p->nparams; i++) total += p->plen[i] + 1;
    char *buf = graph_malloc(total ? total : 1);
    if (!buf) {
        graph_fail(p->g, LF_ERR_NOMEM, "fn_parse: out of memory");
        p->failed = true;
        return false;
    }
    const char *names[LF_MAX_ARGS];
    char *q = buf;
    for (int i = 0; i < p->nparams; i++) {
        memcpy(q, p->pname[i], p->plen[i]);
        q[p->plen[i]] = '\0';
        names[i] = q;
        q += p->plen[i] + 1;
    }
    p->fn = graph_fn_create(p->g, p->nparams, names);
    graph_free(buf);
    if (!p->fn) p->failed = true;
    /* the source holds the names from here on; parameters are found there */
    return p->fn != NULL;
}

/* Parses src into a new fn of g (lf_fn_parse is this). On error records
 * "parse error at LINE:COL: MESSAGE" (LF_ERR_PARSE; LF_ERR_NOMEM when out of
 * memory) and returns NULL. Any nesting depth: the parser's stack of open
 * constructs is graph_malloc'd, its thread stack use is constant. */
static lf_fn *graph_fn_parse(lf_graph *g, const char *src) {
    if (!g) {
        graph_error(NULL, LF_ERR_NULL, "fn_parse: graph is NULL");
        return NULL;
    }
    if (g->status != LF_OK) return NULL;
    if (!src) {
        graph_fail(g, LF_ERR_NULL, "fn_parse: source string is NULL");
        return NULL;
    }
    parser p;
    memset(&p, 0, sizeof p);
    p.g = g;
    p.pos = src;
    p.line = p.col = 1;
    if (!next(&p) || !parse_params(&p) || !make_fn(&p)) return NULL;
    int e = parse_body(&p);
    if (e >= 0 && p.tok.kind != T_EOF)
        e = fail_at(&p, &p.tok, "unexpected '" TOKFMT "' after the expression", TOKARG(&p.tok));
    if (e < 0 || p.failed) return NULL;
    p.fn->result = e;
    graph_fn_keep_source(p.fn, src);
    return p.fn;
}

lf_fn *lf_fn_parse(lf_graph *g, const char *src) { return graph_fn_parse(g, src); }

/* ==== printer ===================================================================== */

/* Output that counts everything and stores what fits. */
typedef struct out {
    char *buf;  /* destination (NULL when cap is 0) */
    size_t cap; /* its size, NUL included */
    size_t len; /* characters produced so far, stored or not */
} out;

static void put(out *o, const char *s, size_t n) {
    if (o->len < o->cap) {
        size_t room = o->cap - 1 - o->len; /* keep one byte for the NUL */
        memcpy(o->buf + o->len, s, n < room ? n : room);
    }
    o->len += n;
}

/* Level an expression prints at. */
static int expr_prec(const fn_expr *e) {
    if (e->kind != EXPR_OP) return P_ATOM; /* negative constants print in parentheses */
    return graph_ops[e->op].syntax == OPSYN_CALL ? P_ATOM : op_prec(e->op);
}

/* Whether a constant prints with a minus sign (and so in parentheses). */
static bool const_negative(const fn_expr *e) {
    return e->is_int ? e->value.i < 0 : signbit(e->value.f);
}

/* A literal with the current value of scalar expression e (EXPR_SCALAR):
 * printed as a cast of it, "f32(0.5)". */
static fn_expr scalar_literal(const fn_expr *e) {
    fn_expr lit = graph_fn_blank_expr(EXPR_CONST);
    lit.is_int = !graph_dtype_is_float(e->cast_to);
    lit.value = e->node->u.value;
    return lit;
}

/* Whether f has a parameter named s. */
static bool has_param(const lf_fn *f, const char *s) {
    for (int i = 0; i < f->nparams; i++)
        if (strcmp(f->param_names[i], s) == 0) return true;
    return false;
}

/* The text of a constant of f: "(-0.5)", "2.0", "inf", "(-3)". Returns its length. */
static size_t const_text(const lf_fn *f, const fn_expr *e, char *s, size_t cap) {
    if (e->beyond) { /* its digits as written: they parse back to the same literal */
        char num[48];
        graph_fn_beyond_str(e, num, sizeof num);
        return (size_t)snprintf(s, cap, e->value.f < 0 ? "(%s)" : "%s", num);
    }
    if (e->is_int) {
        int n = snprintf(s, cap, e->value.i < 0 ? "(%lld)" : "%lld", (long long)e->value.i);
        return (size_t)n;
    }
    double v = e->value.f;
    bool neg = const_negative(e);
    char num[40];
    if (isnan(v)) {
        strcpy(num, "nan");
    } else if (isinf(v)) {
        strcpy(num, has_param(f, "inf") ? "1e999" : "inf"); /* strtod reads 1e999 as inf */
    } else {
        double a = fabs(v);
        for (int digits = 15; digits <= 17; digits++) {
            snprintf(num, sizeof num, "%.*g", digits, a);
            if (strtod(num, NULL) == a) break;
        }
        if (!strpbrk(num, ".e")) strcat(num, ".0");
    }
    return (size_t)snprintf(s, cap, neg ? "(-%s)" : "%s", num);
}

/* Whether operand a of e (index k) needs parentheses. */
static bool operand_parens(const lf_fn *f, const fn_expr *e, int k) {
    const fn_expr *a = &f->exprs[e->arg[k]];
    int pa = expr_prec(a), need;
    if (e->kind == EXPR_CAST || e->kind == EXPR_CALL || graph_ops[e->op].syntax == OPSYN_CALL) return false;
    switch (e->op) {
    case LF_OP_POW: need = k == 0 ? P_ATOM : P_UNARY; break;
    case LF_OP_NEG:
        /* "-2" would read back as the constant -2, so write "-(2)" */
        if (a->kind == EXPR_CONST && !const_negative(a)) return true;
        need = P_UNARY;
        break;
    case LF_OP_NOT: need = P_NOT; break;
    case LF_OP_BITNOT: need = P_UNARY; break; /* ~2 does not fold: no "~(2)" needed */
    default: {
        int prec = op_prec(e->op);
        need = k == 0 && prec != P_CMP ? prec : prec + 1; /* left-assoc; CMP does not chain */
    }
    }
    return pa < need;
}

/* Whether an infix operator is printed with spaces around it ("a + b",
 * "a and b", "a & b", "a << b"; but "a*b", "a//b", "a**b"). */
static bool spaced(lf_op op) { return op_prec(op) != P_MUL && op_prec(op) != P_POW; }

/* A work item: print expression id (with parentheses when paren), or text. */
typedef struct item {
    int id;           /* expression, or -1 for text */
    bool paren;       /* expression: wrap in parentheses */
    const char *text; /* text (static or from graph_ops) */
} item;

static size_t sat_add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

/* Full printed length of every expression (saturating at SIZE_MAX). */
static void expr_lengths(const lf_fn *f, size_t *len) {
    char tmp[64];
    for (int i = 0; i < f->nexprs; i++) {
        const fn_expr *e = &f->exprs[i];
        size_t n = 0;
        int nargs = 0;
        switch (e->kind) {
        case EXPR_PARAM: n = strlen(f->param_names[e->param]); break;
        case EXPR_CONST: n = const_text(f, e, tmp, sizeof tmp); break;
        case EXPR_CAST: n = strlen(lf_dtype_name(e->cast_to)) + 2; nargs = 1; break;
        case EXPR_SCALAR: {
            fn_expr lit = scalar_literal(e);
            n = strlen(lf_dtype_name(e->cast_to)) + 2 + const_text(f, &lit, tmp, sizeof tmp);
            break;
        }
        case EXPR_CALL: /* name(a, b) */
            nargs = e->call->nparams;
            n = strlen(e->call->name) + 2 + 2 * (size_t)(nargs > 0 ? nargs - 1 : 0);
            break;
        case EXPR_OP: {
            const op_info *oi = &graph_ops[e->op];
            nargs = oi->arity;
            if (oi->syntax == OPSYN_CALL) n = strlen(oi->text) + 2 + 2 * (size_t)(nargs - 1);
            else if (oi->syntax == OPSYN_INFIX) n = strlen(oi->text) + 2 * spaced(e->op);
            else n = strlen(oi->text) + (e->op == LF_OP_NOT);
            break;
        }
        }
        for (int k = 0; k < nargs; k++)
            n = sat_add(sat_add(n, len[e->arg[k]]), 2 * (size_t)operand_parens(f, e, k));
        len[i] = n;
    }
}

/* Prints expression result of f into o, iteratively. stack holds at least
 * 8 * nexprs + 1 items. */
static void print_expr(const lf_fn *f, out *o, item *stack) {
    char tmp[64];
    size_t sp = 0;
    stack[sp++] = (item){f->result, false, NULL};
    while (sp > 0 && o->len + 1 < o->cap) {
        item it = stack[--sp];
        if (it.id < 0) {
            put(o, it.text, strlen(it.text));
            continue;
        }
        const fn_expr *e = &f->exprs[it.id];
        if (it.paren) {
            stack[sp++] = (item){-1, false, ")"};
            put(o, "(", 1);
        }
        if (e->kind == EXPR_PARAM) {
            const char *s = f->param_names[e->param];
            put(o, s, strlen(s));
        } else if (e->kind == EXPR_CONST) {
            put(o, tmp, const_text(f, e, tmp, sizeof tmp));
        } else if (e->kind == EXPR_SCALAR) {
            fn_expr lit = scalar_literal(e);
            const char *s = lf_dtype_name(e->cast_to);
            put(o, s, strlen(s));
            put(o, "(", 1);
            put(o, tmp, const_text(f, &lit, tmp, sizeof tmp));
            put(o, ")", 1);
        } else if (e->kind == EXPR_CALL) {
            put(o, e->call->name, strlen(e->call->name));
            put(o, "(", 1);
            stack[sp++] = (item){-1, false, ")"};
            for (int k = e->call->nparams - 1; k >= 0; k--) {
                stack[sp++] = (item){e->arg[k], false, NULL};
                if (k > 0) stack[sp++] = (item){-1, false, ", "};
            }
        } else if (e->kind == EXPR_CAST) {
            const char *s = lf_dtype_name(e->cast_to);
            put(o, s, strlen(s));
            put(o, "(", 1);
            stack[sp++] = (item){-1, false, ")"};
            stack[sp++] = (item){e->arg[0], false, NULL};
        } else {
            const op_info *oi = &graph_ops[e->op];
            /* pushed in reverse order of printing */
            if (oi->syntax == OPSYN_CALL) {
                put(o, oi->text, strlen(oi->text));
                put(o, "(", 1);
                stack[sp++] = (item){-1, false, ")"};
                for (int k = oi->arity - 1; k >= 0; k--) {
                    stack[sp++] = (item){e->arg[k], false, NULL};
                    if (k > 0) stack[sp++] = (item){-1, false, ", "};
                }
            } else if (oi->syntax == OPSYN_INFIX) {
                stack[sp++] = (item){e->arg[1], operand_parens(f, e, 1), NULL};
                if (spaced(e->op)) stack[sp++] = (item){-1, false, " "};
                stack[sp++] = (item){-1, false, oi->text};
                if (spaced(e->op)) stack[sp++] = (item){-1, false, " "};
                stack[sp++] = (item){e->arg[0], operand_parens(f, e, 0), NULL};
            } else {
                put(o, oi->text, strlen(oi->text));
                if (e->op == LF_OP_NOT) put(o, " ", 1);
                stack[sp++] = (item){e->arg[0], operand_parens(f, e, 0), NULL};
            }
        }
    }
}

int graph_fn_print(const lf_fn *f, char *buf, size_t cap) {
    if (!f || f->result < 0 || f->result >= f->nexprs) return -1;
    if (!buf) cap = 0;
    out o = {buf, cap, 0};
    put(&o, "(", 1);
    for (int i = 0; i < f->nparams; i++) {
        if (i) put(&o, ", ", 2);
        put(&o, f->param_names[i], strlen(f->param_names[i]));
    }
    put(&o, ") -> ", 5);
    size_t small_len[32];
    item small_stack[8 * 32 + 1];
    size_t *len = small_len;
    item *stack = small_stack;
    void *heap = NULL;
    size_t n = (size_t)f->nexprs;
    if (n > 32) {
        heap = graph_malloc(n * sizeof *len + (8 * n + 1) * sizeof *stack);
        if (!heap) return -1;
        stack = heap;
        len = (size_t *)(stack + 8 * n + 1);
    }
    expr_lengths(f, len);
    size_t total = sat_add(o.len, len[f->result]);
    print_expr(f, &o, stack);
    graph_free(heap);
    if (cap > 0) buf[o.len < cap ? o.len : cap - 1] = '\0';
    return total > INT_MAX ? -1 : (int)total;
}

int lf_fn_print(const lf_fn *f, char *buf, size_t cap) { return graph_fn_print(f, buf, cap); }
