"""Tests of the requeue controller (`rulesched.controllers.requeue`)."""
