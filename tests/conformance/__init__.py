"""Differential conformance suite: scripted protocol scenarios run against kafkalite and Apache Kafka 4.1."""
