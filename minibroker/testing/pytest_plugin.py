"""pytest plugin (entry point pytest11): fixtures giving running minibroker brokers."""
