"""Tests of the audit controller (`rulesched.controllers.audit`): the audit of running pods and descheduling."""
