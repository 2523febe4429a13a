/*
 * conf_fixture.h - what the tests of conf/'s key files share: a whole
 * file loaded from text (its errors, or the struct), and the check that a
 * file fails with exactly the errors wanted, naming the test's line when
 * it does not.
 */
#ifndef CONF_FIXTURE_H
#define CONF_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "conf.h"

/* The file "t.ini" holding text: the config, or NULL with *errors set
 * (malloc'd, the caller frees it). */
static inline struct conf *
conf_fixture_load(const char *text, char **errors)
{
    struct conf *c = NULL;

    *errors = NULL;
    if (conf_load_text("t.ini", text, strlen(text), &c, errors) != 0)
        return NULL;
    return c;
}

static inline void
conf_fixture_expect_errors(const char *file, int line, const char *text, const char *want)
{
    char *errors;
    struct conf *c = conf_fixture_load(text, &errors);

    CHECK(c == NULL);
    CHECK_EQ_STR(errors, want);
    if (c != NULL || errors == NULL || strcmp(errors, want) != 0)
        fprintf(stderr, "  (case at %s:%d)\n", file, line);
    conf_free(c);
    free(errors);
}

#define EXPECT_ERRORS(text, want) conf_fixture_expect_errors(__FILE__, __LINE__, text, want)

#endif /* CONF_FIXTURE_H */
