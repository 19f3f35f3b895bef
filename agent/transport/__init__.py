"""Moving released frames off the device: agent/transport/mqtt.py publishes them
over MQTT and keeps them in agent/transport/outbox.py until the gateway's receipt."""
