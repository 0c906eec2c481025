"""Tests of the stef package, one package per subpackage."""
