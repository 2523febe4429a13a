/*
 * lines.c - one formatter and one parser for every line kind of
 * bal_lines.h. A kind's fields are members of the caller's record, read
 * and written through memcpy at their offset and size, so that an enum, a
 * bool and a uint32_t take the same path.
 */
#include <stdio.h>
#include <string.h>

#include "bal_lines.h"

/* ------------------------------------------------------------- fields */

/* The length of a field's key ("health=" of health=up), 0 when the field
 * is a bare value. */
static size_t
bal_line_key_len(const struct bal_line_field *f)
{
    size_t n = strlen(f->name);

    return n > 0 && f->name[n - 1] == '=' ? n : 0;
}

/* A byte a word may hold: no blank (the separator), no control byte (a
 * line is one line of a log too). */
static bool
bal_line_is_word_byte(unsigned char c)
{
    return c > ' ' && c != 0x7f;
}

/* An integer field's value, of its size (1, 2, 4 or 8: the rows'
 * sizeof). */
union bal_line_int {
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
};

static uint64_t
bal_line_get(const void *rec, const struct bal_line_field *f)
{
    union bal_line_int v = { .u64 = 0 };

    if (f->size > sizeof(v))
        return UINT64_MAX;              /* no row's: out of every bound */
    memcpy(&v, (const char *)rec + f->offset, f->size);
    return f->size == 1 ? v.u8 : f->size == 2 ? v.u16 : f->size == 4 ? v.u32 : v.u64;
}

/* x fits f's size: the caller checked it against f's bounds. */
static void
bal_line_set(void *rec, const struct bal_line_field *f, uint64_t x)
{
    union bal_line_int v = { .u64 = x };

    if (f->size == 1)
        v.u8 = (uint8_t)x;
    else if (f->size == 2)
        v.u16 = (uint16_t)x;
    else if (f->size == 4)
        v.u32 = (uint32_t)x;
    if (f->size <= sizeof(v))
        memcpy((char *)rec + f->offset, &v, f->size);
}

/* The largest value a field of f's size holds. */
static uint64_t
bal_line_size_max(const struct bal_line_field *f)
{
    return f->size >= 8 ? UINT64_MAX : (UINT64_C(1) << (f->size * 8)) - 1;
}

/* s[0..n) as a decimal number: digits only, no leading zero (one
 * spelling), below 2^64. */
static int
bal_line_number(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;

    if (n == 0 || (n > 1 && s[0] == '0'))
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned d = (unsigned)(s[i] - '0');

        if (s[i] < '0' || s[i] > '9' || v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* SECONDS[.D[D[D]]] as milliseconds. */
static int
bal_line_millis(const char *s, size_t n, uint64_t *out)
{
    const char *dot = memchr(s, '.', n);
    size_t ni = dot != NULL ? (size_t)(dot - s) : n, nf = dot != NULL ? n - ni - 1 : 0;
    uint64_t secs, frac = 0;

    if (bal_line_number(s, ni, &secs) == -1 || (dot != NULL && (nf == 0 || nf > 3)) ||
        secs > UINT64_MAX / 1000)
        return -1;
    for (size_t i = 0; i < 3; i++) {
        char c = i < nf ? dot[1 + i] : '0';

        if (c < '0' || c > '9')
            return -1;
        frac = frac * 10 + (uint64_t)(c - '0');
    }
    if (secs * 1000 > UINT64_MAX - frac)
        return -1;
    *out = secs * 1000 + frac;
    return 0;
}

/* The value v[0..n) of field f into rec; -1 when f does not take it. */
static int
bal_line_take(const struct bal_line_field *f, const char *v, size_t n, void *rec)
{
    uint64_t x;

    switch (f->type) {
    case BAL_LINE_WORD:
        if (n == 0 || n >= f->size)
            return -1;
        for (size_t i = 0; i < n; i++) {
            if (!bal_line_is_word_byte((unsigned char)v[i]))
                return -1;
        }
        memcpy((char *)rec + f->offset, v, n);
        ((char *)rec)[f->offset + n] = '\0';
        return 0;
    case BAL_LINE_UINT:
    case BAL_LINE_MILLIS:
        if ((f->type == BAL_LINE_UINT ? bal_line_number(v, n, &x)
                                      : bal_line_millis(v, n, &x)) == -1)
            return -1;
        if (x < f->min || x > f->max || x > bal_line_size_max(f))
            return -1;
        bal_line_set(rec, f, x);
        return 0;
    case BAL_LINE_ENUM:
        for (size_t i = 0; i < f->nnames; i++) {
            if (f->names[i] != NULL && strlen(f->names[i]) == n && memcmp(f->names[i], v, n) == 0) {
                bal_line_set(rec, f, i);
                return 0;
            }
        }
        return -1;
    }
    return -1;
}

/* What field f takes, into err: "weight must be a number from 0 to 256". */
static void
bal_line_refused(const struct bal_line_field *f, char *err, size_t errlen)
{
    size_t at, left, n = 0;
    int k;

    switch (f->type) {
    case BAL_LINE_WORD:
        snprintf(err, errlen, "%s must be 1 to %zu bytes, without blanks", f->name, f->size - 1);
        return;
    case BAL_LINE_UINT:
        snprintf(err, errlen, "%s must be a number from %llu to %llu", f->name,
                 (unsigned long long)f->min, (unsigned long long)f->max);
        return;
    case BAL_LINE_MILLIS:
        snprintf(err, errlen, "%s must be seconds from %llu.%03u to %llu.%03u, with up to 3 "
                 "decimals", f->name, (unsigned long long)(f->min / 1000),
                 (unsigned)(f->min % 1000), (unsigned long long)(f->max / 1000),
                 (unsigned)(f->max % 1000));
        return;
    case BAL_LINE_ENUM:
        break;
    }
    /* "health= must be up, down or warning" */
    for (size_t i = 0; i < f->nnames; i++)
        n += f->names[i] != NULL;
    k = snprintf(err, errlen, "%s must be", f->name);
    at = k > 0 ? (size_t)k : 0;
    for (size_t i = 0, seen = 0; i < f->nnames && at < errlen; i++) {
        if (f->names[i] == NULL)
            continue;
        seen++;
        left = errlen - at;
        k = snprintf(err + at, left, "%s%s", seen == 1 ? " " : seen == n ? " or " : ", ",
                     f->names[i]);
        at += k > 0 ? (size_t)k : left;
    }
}

/* ---------------------------------------------------------- formatter */

/* The line being written: buf, its size, what is written; is_failed once
 * something did not fit. */
struct bal_line_out {
    char *buf;
    size_t len, at;
    bool is_failed;
};

static void
bal_line_put(struct bal_line_out *o, const char *s, size_t n)
{
    if (o->is_failed || o->len - o->at <= n) {   /* and the NUL */
        o->is_failed = true;
        return;
    }
    memcpy(o->buf + o->at, s, n);
    o->at += n;
}

/* The value of f in rec, into o; false when the kind does not take it. */
static bool
bal_line_put_value(struct bal_line_out *o, const struct bal_line_field *f, const void *rec)
{
    const char *word = (const char *)rec + f->offset;
    uint64_t v = f->type != BAL_LINE_WORD ? bal_line_get(rec, f) : 0;
    char num[32];
    size_t n;

    switch (f->type) {
    case BAL_LINE_WORD:
        n = strnlen(word, f->size);
        if (n == 0 || n == f->size)
            return false;
        for (size_t i = 0; i < n; i++) {
            if (!bal_line_is_word_byte((unsigned char)word[i]))
                return false;
        }
        bal_line_put(o, word, n);
        return true;
    case BAL_LINE_UINT:
        if (v < f->min || v > f->max)
            return false;
        n = (size_t)snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
        bal_line_put(o, num, n);
        return true;
    case BAL_LINE_MILLIS:
        if (v < f->min || v > f->max)
            return false;
        n = (size_t)snprintf(num, sizeof(num), "%llu.%03u", (unsigned long long)(v / 1000),
                             (unsigned)(v % 1000));
        bal_line_put(o, num, n);
        return true;
    case BAL_LINE_ENUM:
        if (v >= f->nnames || f->names[v] == NULL)
            return false;
        bal_line_put(o, f->names[v], strlen(f->names[v]));
        return true;
    }
    return false;
}

size_t
bal_line_format(char *buf, size_t len, const struct bal_line_kind *k, const void *rec)
{
    struct bal_line_out o = { .buf = buf, .len = len };

    if (len == 0)
        return 0;
    bal_line_put(&o, k->keyword, strlen(k->keyword));
    for (size_t i = 0; i < k->nfields; i++) {
        const struct bal_line_field *f = &k->fields[i];

        bal_line_put(&o, " ", 1);
        bal_line_put(&o, f->name, bal_line_key_len(f));
        if (!bal_line_put_value(&o, f, rec))
            o.is_failed = true;
    }
    bal_line_put(&o, "\n", 1);
    buf[o.is_failed ? 0 : o.at] = '\0';
    return o.is_failed ? 0 : o.at;
}

/* -------------------------------------------------------------- parser */

bool
bal_line_is(const char *line, const struct bal_line_kind *k)
{
    size_t n = strlen(k->keyword);

    return strncmp(line, k->keyword, n) == 0 && (line[n] == ' ' || line[n] == '\0');
}

int
bal_line_parse(const char *line, const struct bal_line_kind *k, void *rec, char *err,
               size_t errlen)
{
    const char *p;

    if (!bal_line_is(line, k)) {
        snprintf(err, errlen, "not a %s line", k->keyword);
        return -1;
    }
    p = line + strlen(k->keyword);
    for (size_t i = 0; i < k->nfields; i++) {
        const struct bal_line_field *f = &k->fields[i];
        size_t klen = bal_line_key_len(f);
        const char *v = p + 1, *e;

        if (*p != ' ') {                /* the line ended */
            snprintf(err, errlen, "%s missing", f->name);
            return -1;
        }
        e = v + strcspn(v, " ");
        if ((size_t)(e - v) < klen || memcmp(v, f->name, klen) != 0) {
            snprintf(err, errlen, "expected %s", f->name);
            return -1;
        }
        if (bal_line_take(f, v + klen, (size_t)(e - v) - klen, rec) == -1) {
            bal_line_refused(f, err, errlen);
            return -1;
        }
        p = e;
    }
    if (*p != '\0') {
        snprintf(err, errlen, "unexpected text after %s",
                 k->nfields > 0 ? k->fields[k->nfields - 1].name : k->keyword);
        return -1;
    }
    return 0;
}
