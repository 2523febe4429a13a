/*
 * check.h - the assertions of the unit tests: each failure prints file, line
 * and expression, and the test's exit status counts the failures.
 */
#ifndef CHECK_H
#define CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failures;

#define CHECK(expr)                                                         \
    do {                                                                    \
        if (!(expr)) {                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
                    #expr);                                                 \
            check_failures++;                                               \
        }                                                                   \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                  \
    do {                                                                    \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);     \
        if (check_a_ != check_b_) {                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n", \
                    __FILE__, __LINE__, #a, #b, check_a_, check_b_);        \
            check_failures++;                                               \
        }                                                                   \
    } while (0)

#define CHECK_EQ_STR(a, b)                                                  \
    do {                                                                    \
        const char *check_a_ = (a), *check_b_ = (b);                        \
        if (check_a_ == NULL || check_b_ == NULL ||                         \
            strcmp(check_a_, check_b_) != 0) {                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (\"%s\" != \"%s\")\n", \
                    __FILE__, __LINE__, #a, #b, check_a_ ? check_a_ : "(null)", \
                    check_b_ ? check_b_ : "(null)");                        \
            check_failures++;                                               \
        }                                                                   \
    } while (0)

/* Ends main(): prints a summary and returns the exit status. */
#define CHECK_DONE()                                                        \
    (fprintf(stderr, "%s: %d failure(s)\n", __FILE__, check_failures),      \
     check_failures == 0 ? 0 : 1)

#endif /* CHECK_H */
