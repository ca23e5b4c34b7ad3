"""The launcher of a grading run and the canonical values it shares with the grader (both run
inside the grading sandbox; standard library only)."""
