"""magnetar.admin_client"""
