/*
 * fuzz.h - what the libFuzzer targets of tests/fuzz share.
 *
 * Each target defines LLVMFuzzerTestOneInput, feeds the bytes to one
 * parser of outside input, and checks what the parser promises. A broken
 * promise aborts, which libFuzzer reports as a crash with the input that
 * did it. FUZZ_CHECK is not assert(): the build may define NDEBUG.
 */
#ifndef FUZZ_H
#define FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(expr)                                                    \
    do {                                                                    \
        if (!(expr)) {                                                      \
            fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__,     \
                    __LINE__, #expr);                                       \
            abort();                                                        \
        }                                                                   \
    } while (0)

/* The input as a config value: a C string cut at its first NUL, CR or LF.
 * Values reach the parsers as strings, one line each (conf_load refuses
 * NUL bytes and stray CRs before any value is parsed). The caller frees
 * it. */
static inline char *
fuzz_string(const uint8_t *data, size_t size)
{
    size_t n = 0;
    char *s;

    while (n < size && data[n] != '\0' && data[n] != '\r' && data[n] != '\n')
        n++;
    s = malloc(n + 1);

    if (s == NULL)
        abort();
    memcpy(s, data, n);
    s[n] = '\0';
    return s;
}

/* A parser's error message: set, NUL-terminated within its buffer, and one
 * line (it ends up in a log line or a JSON string). */
static inline void
fuzz_check_message(const char *err, size_t errlen)
{
    size_t n = strnlen(err, errlen);

    FUZZ_CHECK(n > 0 && n < errlen);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(err[i] != '\n' && err[i] != '\r');
}

#endif /* FUZZ_H */
