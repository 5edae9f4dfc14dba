"""magnetar.connectors"""
