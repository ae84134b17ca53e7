"""The controller: replica assignment, partition and replica state machines, election."""
